#!/usr/bin/perl
# The broker is killed with SIGKILL under push, pop and ack load (SPEC 15, 19): restarted on
# the same database and spool directory, it delivers every item it answered "queued" or
# "buffered" (some were in the spool at the kill), an item its producer retried with the same
# transactionId is stored once, and the leases the dead broker held expire and redeliver.
# QUEEN_FAULT_ROUNDS (default 1) kills it that many times in one run.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;
use QueenLoad;

my $pg = start_pg();
my $dir = QueenTest::tmpdir() . '/spool-kill';
my $port = QueenTest::free_port();
my $q = start_queend(FILE_BUFFER_DIR => $dir, PORT => $port);
is(($q->configure('fq', leaseTime => 2))[0], 200, 'queue fq: leases of 2 s');

my $producers = 3;
my $batch = 5;
my $load = QueenLoad->start($q, producers => $producers, consumers => 2, batch => $batch);
my $rounds = $ENV{QUEEN_FAULT_ROUNDS} || 1;
my (@restart, $spooled, %held);
for my $round (1 .. $rounds) {
	sleep 1.5;
	# Part of the load goes to the spool just before the kill: buffered items must survive.
	$q->post_json('/api/v1/system/maintenance', { enabled => jtrue }) if $round % 2;
	sleep 0.5;
	$spooled += (($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} // 0;
	# A batch leased by the broker about to die (group h, which only this test reads),
	# never acknowledged: it must come back once its lease expires.
	if ($round == 1) {
		my ($s, $p) = $q->pop('fq', partition => 'p0', consumerGroup => 'h', batch => 10,
			subscriptionMode => 'all');
		$held{ $_->{data}{k} } = 1 for $s == 200 ? @{ $p->{messages} } : ();
	}
	$q->kill_hard;
	my $t0 = time;
	$q = start_queend(FILE_BUFFER_DIR => $dir, PORT => $port);
	push @restart, time - $t0;
}
sleep 1.5;
my $r = $load->finish($pg, 30);
$load->figures('kill -9', $r, rounds => $rounds, spooled_at_kill => $spooled,
	in_flight_max => $rounds * $producers * $batch,
	restart_s => join(',', map { sprintf '%.2f', $_ } @restart));

ok($r->{acked} > 0, "items acknowledged: $r->{acked}");
ok($spooled > 0, "some of them were in the spool at the kill: $spooled");
is_deeply($r->{died}, [], 'every load process ran to the end');
is($r->{lost}, 0, 'no acknowledged item is lost') or diag("lost: @{ $r->{lost_keys} }");
is($r->{dup_txn}, 0, 'no item with a transactionId is stored twice');
ok($r->{dup_plain} <= $rounds * $producers * $batch,
	"items without one stored twice: $r->{dup_plain}, at most those in flight at the kills");
ok(keys %held > 0, 'messages were leased by the broker killed: ' . scalar keys %held);
my $again = wait_until(sub {
	my ($s, $p) = $q->pop('fq', partition => 'p0', consumerGroup => 'h', batch => 10);
	$s == 200 ? [ sort map { $_->{data}{k} } @{ $p->{messages} } ] : undef;
}, 10, 0.2);
# The batch comes back from its first offset (it may have grown since: a batch is up to 10).
my %again = map { $_ => 1 } @{ $again // [] };
is(scalar(grep { !$again{$_} } keys %held), 0, 'the lease expired and the same messages came back');
my (undef, $b) = $q->get('/api/v1/status/buffers');
is($b->{pendingCount}, 0, 'the spool is empty');
is($b->{failedCount}, 0, 'nothing set aside');

done_testing;
