#!/usr/bin/perl
# The spool drains under load (SPEC 15): after an outage of PostgreSQL under a steady push
# load at half of what these clients reach, the spool empties while the load goes on, pushes
# made after the return reach consumers, each partition keeps its order (spooled items commit
# before newer ones), and at full load the spool empties too (before, it grew for as long as
# producers pushed at full rate). QUEEN_FAULT_OUTAGE: seconds of the half-load outage (4 here
# to keep the suite short; the issue's figure is for 10: QUEEN_FAULT_OUTAGE=10).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;
use QueenLoad;

my $pg = start_pg();
my $q = start_queend();
my $producers = 3;

sub pending { ((($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount}) // -1 }

# Runs $load through an outage of $outage s, then $after s more; returns the time the spool
# took to empty after the database came back (undef: it did not while the load went on), the
# most it held, and the return time.
sub outage {
	my ($load, $outage, $after) = @_;
	sleep 1.5;
	$pg->stop('immediate') or BAIL_OUT('pg_ctl stop failed');
	my $t_down = time;
	sleep 0.1 while time - $t_down < $outage;
	$pg->start or BAIL_OUT('pg_ctl start failed');
	my $t_back = time;
	my ($empty, $most) = (undef, 0);
	while (time - $t_back < $after) {
		my $n = pending();
		$most = $n if $n > $most;
		$empty //= time - $t_back if $n == 0;
		sleep 0.05;
	}
	return ($empty, $most, $t_back);
}

# What these clients reach against this broker: pushes of one item, as fast as answered.
my $probe = QueenLoad->start($q, queue => 'probe', producers => $producers, consumers => 0);
sleep 2;
my $pr = $probe->finish(undef, 0);
my $capacity = $pr->{acked} / 2;
ok($capacity > 0, sprintf('capacity of %d producers: %.0f items/s', $producers, $capacity));

subtest 'half load' => sub {
	my $outage = $ENV{QUEEN_FAULT_OUTAGE} || 4;
	my $rate = $capacity / 2 / $producers;
	$q->configure('half', leaseTime => 2);
	my $load = QueenLoad->start($q, queue => 'half', producers => $producers, consumers => 2,
		rate => $rate);
	my ($empty, $most, $t_back) = outage($load, $outage, 4);
	my $r = $load->finish($pg, 30);
	my $d = $load->delays($r->{rec}, $t_back, $t_back + 4);
	my $bad = $load->order_violations($pg);
	$load->figures('half load', $r, outage_s => $outage,
		rate_items_s => sprintf('%.0f', $rate * $producers),
		spool_most => $most, spool_empty_after_s => defined $empty ? sprintf('%.2f', $empty) : 'never',
		delay_after_return_p50_s => sprintf('%.3f', QueenLoad::pct($d, 0.5) // -1),
		delay_after_return_p95_s => sprintf('%.3f', QueenLoad::pct($d, 0.95) // -1),
		delay_after_return_max_s => sprintf('%.3f', $d->[-1] // -1), order_violations => $bad);
	ok($r->{buffered} > 0, "items were spooled: $r->{buffered}");
	ok(defined $empty, 'the spool emptied while the load went on, after ' .
		(defined $empty ? sprintf('%.2f s', $empty) : 'never'));
	is($r->{lost}, 0, 'no acknowledged item is lost');
	is($r->{dup_txn} + $r->{dup_plain}, 0, 'nothing is stored twice');
	is($bad, 0, 'every partition keeps each producer\'s order');
	ok(@$d > 0, scalar(@$d) . ' items pushed after the return reached consumers');
};

subtest 'full load' => sub {
	$q->configure('full', leaseTime => 2);
	my $load = QueenLoad->start($q, queue => 'full', producers => $producers, consumers => 2);
	my ($empty, $most) = outage($load, 2, 4);
	my $r = $load->finish($pg, 30);
	$load->figures('full load', $r, outage_s => 2, spool_most => $most,
		spool_empty_after_s => defined $empty ? sprintf('%.2f', $empty) : 'never',
		order_violations => $load->order_violations($pg));
	ok($r->{buffered} > 0, "items were spooled: $r->{buffered}");
	ok(defined $empty, 'the spool emptied while producers pushed at full rate');
	is($r->{lost}, 0, 'no acknowledged item is lost');
	is($r->{dup_txn} + $r->{dup_plain}, 0, 'nothing is stored twice');
};

done_testing;
