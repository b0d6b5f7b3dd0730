#!/usr/bin/perl
# PostgreSQL restarts under push, pop and ack load (SPEC 15, 16, 19), with -m fast (clients
# disconnected, clean shutdown) and -m immediate (a crash: no shutdown checkpoint): pushes go
# to the spool and answer "buffered", no request waits longer than QUEEN_STMT_TIMEOUT_MS,
# /health answers 503 and then 200, the spool drains, nothing acknowledged is lost and
# nothing with a transactionId is stored twice.
# QUEEN_FAULT_ROUNDS (default 1) restarts PostgreSQL that many times per mode;
# QUEEN_FAULT_MODES (default "fast immediate") chooses the modes.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;
use QueenLoad;

my $pg = start_pg();
my $stmt_ms = 5000;
my $q = start_queend(QUEEN_STMT_TIMEOUT_MS => $stmt_ms);
my $rounds = $ENV{QUEEN_FAULT_ROUNDS} || 1;
my $producers = 3;
my $batch = 5;

for my $mode (split ' ', $ENV{QUEEN_FAULT_MODES} || 'fast immediate') {
	my $queue = "fq-$mode";
	is(($q->configure($queue, leaseTime => 2))[0], 200, "$mode: queue $queue");
	my $load = QueenLoad->start($q, queue => $queue, producers => $producers, consumers => 2,
		batch => $batch, health => 1);
	my (@down, @back);
	for my $round (1 .. $rounds) {
		sleep 1.5;
		push @down, time;
		$pg->stop($mode) or BAIL_OUT("pg_ctl stop -m $mode failed");
		sleep 0.5;	# an outage long enough for the spool to take pushes
		$pg->start or BAIL_OUT('pg_ctl start failed');
		push @back, time;
	}
	sleep 0.5;
	wait_until(sub { ((($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} // 1) == 0 },
		30, 0.1);
	sleep 1;
	my $r = $load->finish($pg, 30);
	my $rec = $r->{rec};
	my ($longest, $worst_q, $worst_p) = (0, 0, 0);
	for my $i (0 .. $#down) {
		my $l = $load->longest_between($rec, $down[$i], $back[$i]);
		$longest = $l if $l > $longest;
		my ($rq, $rp) = $load->recovery($rec, $back[$i]);
		$worst_q = $rq // 99 if ($rq // 99) > $worst_q;
		$worst_p = $rp // 99 if ($rp // 99) > $worst_p;
	}
	my $runs = $load->health_runs($rec);
	$load->figures("pg_ctl restart -m $mode", $r, rounds => $rounds,
		longest_during_outage_s => sprintf('%.3f', $longest),
		first_queued_after_s => sprintf('%.2f', $worst_q),
		first_pop_after_s => sprintf('%.2f', $worst_p),
		outage_s => sprintf('%.2f', $back[-1] - $down[-1]),
		health => join(',', map { $_->[1] } @$runs));

	ok($r->{acked} > 0 && $r->{buffered} > 0,
		"$mode: items acknowledged ($r->{acked}), some buffered ($r->{buffered})");
	is_deeply($r->{died}, [], "$mode: every load process ran to the end");
	is($r->{lost}, 0, "$mode: no acknowledged item is lost") or diag("lost: @{ $r->{lost_keys} }");
	is($r->{dup_txn}, 0, "$mode: no item with a transactionId is stored twice");
	is($r->{dup_plain}, 0, "$mode: no item without one is stored twice");
	ok($r->{longest} * 1000 < $stmt_ms + 1000,
		sprintf('%s: the slowest push took %.2f s, within QUEEN_STMT_TIMEOUT_MS', $mode,
			$r->{longest}));
	my $seq = join(',', map { $_->[1] } @$runs);
	like($seq, qr/^200,(?:503,200,?)+$/, "$mode: /health went 200, 503, 200 ($seq)");
	ok($worst_q < 10 && $worst_p < 10, "$mode: pushes queued and pops served again after the restart");
	my (undef, $b) = $q->get('/api/v1/status/buffers');
	is($b->{pendingCount}, 0, "$mode: the spool is empty");
	is($b->{failedCount}, 0, "$mode: nothing set aside");
}

done_testing;
