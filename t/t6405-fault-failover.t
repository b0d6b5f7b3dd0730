#!/usr/bin/perl
# Failover to a synchronous standby under push load (SPEC 15, 16, 19). PG_HOST lists the
# standby first and one PG_PORT serves both hosts: the broker connects to the primary only
# (before, it started on the standby and failed: "cannot execute CREATE TABLE in a read-only
# transaction"). The primary dies: pushes are buffered, /health answers 503 while only the
# read-only standby answers; the standby is promoted: the broker moves to it, drains its
# spool there, sets nothing aside in failed.spool, listens there again (a push through a
# second broker on the new primary wakes a long-poll parked on the first), and every item
# acknowledged is on the new primary.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;
use QueenLoad;

my $pg = start_pg();
my $sb = start_standby($pg);
my $q = start_queend(PG_HOST => '127.0.0.2,127.0.0.1', PG_PORT => $pg->port,
	QUEEN_INDEX_RESYNC_MS => 600000);
is(($q->configure('fq', leaseTime => 2))[0], 200, 'the broker runs on the primary, listed second');
is($sb->psql("SELECT count(*) FROM queen_queues WHERE name = 'fq'"), 1,
	'what it writes reaches the standby');

my $producers = 3;
my $batch = 5;
my $load = QueenLoad->start($q, producers => $producers, consumers => 2, batch => $batch,
	health => 1);
sleep 1.5;
my $t_down = time;
$pg->stop('immediate') or BAIL_OUT('cannot stop the primary');
# A failover takes its time: while only the standby (read-only) answers, the broker is not
# healthy.
my $health_ro = wait_until(sub { ($q->get('/health'))[0] == 503 }, 5, 0.05);
sleep 0.5;
my ($s_ro) = $q->get('/health');
ok($health_ro && $s_ro == 503, '/health answers 503 while only the read-only standby answers');
$sb->promote or BAIL_OUT('pg_ctl promote failed');
my $t_up = time;
sleep 1.5;
wait_until(sub { ((($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} // 1) == 0 }, 20, 0.1);
my $r = $load->finish($sb, 30);
my ($rq, $rp) = $load->recovery($r->{rec}, $t_up);
my $seq = join(',', map { $_->[1] } @{ $load->health_runs($r->{rec}) });
$load->figures('failover', $r, outage_s => sprintf('%.2f', $t_up - $t_down),
	longest_during_outage_s => sprintf('%.3f', $load->longest_between($r->{rec}, $t_down, $t_up)),
	first_queued_after_promotion_s => defined $rq ? sprintf('%.2f', $rq) : 'never',
	first_pop_after_promotion_s => defined $rp ? sprintf('%.2f', $rp) : 'never',
	in_flight_max => $producers * $batch, health => $seq);

ok($r->{acked} > 0 && $r->{buffered} > 0,
	"items acknowledged: $r->{acked}, buffered during the failover: $r->{buffered}");
is_deeply($r->{died}, [], 'every load process ran to the end');
is($r->{lost}, 0, 'every acknowledged item is on the new primary') or diag("lost: @{ $r->{lost_keys} }");
is($r->{dup_txn}, 0, 'no item with a transactionId is stored twice');
ok($r->{dup_plain} <= $producers * $batch,
	"items without one stored twice: $r->{dup_plain}, at most those in flight");
like($seq, qr/^200,(?:503,200,?)+$/, "/health went 200, 503, 200 ($seq)");
ok(defined $rq && defined $rp, 'pushes queued and pops served on the new primary');
my (undef, $b) = $q->get('/api/v1/status/buffers');
is($b->{pendingCount}, 0, 'the spool is drained');
is($b->{failedCount}, 0, 'nothing set aside in failed.spool');

subtest 'the broker listens on the new primary' => sub {
	my $q2 = start_queend(PG_HOST => '127.0.0.2', PG_PORT => $sb->port);
	my $parked = QueenTest::bg(sub {
		my $t0 = time;
		my ($s, $p) = $q->pop('wake', wait => 'true', timeout => 8000);
		return { status => $s, took => time - $t0 };
	});
	sleep 1;
	my ($s, $p) = $q2->push_items({ queue => 'wake', payload => 1 });
	is($p->[0]{status}, 'queued', 'a push through a second broker started on the new primary');
	my $w = $parked->result(20);
	is($w->{status}, 200, 'wakes the long-poll parked on the first');
	ok(($w->{took} // 99) < 5, sprintf('by notification (%.2f s), not at its deadline',
		$w->{took} // -1));
};

done_testing;
