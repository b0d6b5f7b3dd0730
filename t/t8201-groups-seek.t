#!/usr/bin/perl
# Seek (SPEC 10): a group's cursor moves to the end or to a segment boundary by time,
# backwards or forwards, never below the log start; exactly one group moves, the cursor is
# created when absent, a live lease is released, the retry budget and delivery attempts start
# over, and pops (also parked ones) see the new position at once.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

sub seek_group {
	my ($group, $queue, $body, $partition) = @_;
	my $path = "/api/v1/consumer-groups/$group/queues/$queue" .
		(defined $partition ? "/partitions/$partition" : '') . '/seek';
	return $q->request('POST', $path, defined $body ? to_json($body) : undef);
}

sub committed_of {
	my ($group, $queue, $partition) = @_;
	my ($s, $d) = $q->get("/api/v1/consumer-groups/$group");
	my ($p) = grep { $_->{partition} eq ($partition // 'Default') }
		@{ ($d // {})->{$queue}{partitions} // [] };
	return $p ? $p->{committed} : undef;
}

# Pops everything deliverable for $group (batch 10) and acks it; returns the transactionIds.
sub drain {
	my ($queue, $group, %o) = @_;
	my ($s, $b) = $q->pop($queue, consumerGroup => $group, subscriptionMode => 'all',
		batch => 10, %o);
	return [] unless $s == 200;
	$q->ack_all($b);
	return txns($b);
}

# Two pushes more than a second apart: two segments with distinct times.
$q->push_n('sk', 2, prefix => 'sk-a');
my ($s, $peek) = $q->pop('sk', consumerGroup => 'peek', subscriptionMode => 'all',
	autoAck => 'true');
my $t_a = $peek->{messages}[-1]{createdAt};
wait_until(sub { time > iso_epoch($t_a) + 1.2 }, 5);
$q->push_n('sk', 2, prefix => 'sk-b');
(undef, $peek) = $q->pop('sk', consumerGroup => 'peek', autoAck => 'true');
my $t_b = $peek->{messages}[0]{createdAt};
ok(iso_epoch($t_b) - iso_epoch($t_a) >= 1, "the two pushes are apart: $t_a, $t_b");
my $between = iso_ms(iso_epoch($t_a) + 0.5);
my $long_ago = '2000-01-01T00:00:00.000Z';

subtest 'a timestamp between two pushes lands on the second one\'s first offset' => sub {
	is_deeply(drain('sk', 'g1'), [qw(sk-a-0 sk-a-1 sk-b-0 sk-b-1)], 'g1 consumed everything');
	my ($s, $b) = seek_group('g1', 'sk', { timestamp => $between });
	is($s, 200, "seek to $between");
	is_true($b->{success}, 'success');
	is($b->{consumerGroup}, 'g1', 'consumerGroup');
	is($b->{queueName}, 'sk', 'queueName');
	is($b->{partitionsUpdated}, 1, 'partitionsUpdated');
	is($b->{partitions}[0]{committed}, 1, 'committed = first offset of the later segment - 1');
	is_deeply(drain('sk', 'g1'), [qw(sk-b-0 sk-b-1)], 'the next pop starts at the second push');
};

subtest 'backwards to before the log, forwards, to the end, past the end' => sub {
	my ($s, $b) = seek_group('g1', 'sk', { timestamp => $long_ago });
	is($s, 200, 'seek to long ago');
	is($b->{partitions}[0]{committed}, -1, 'committed -1: the whole log again');
	($s, $b) = seek_group('g1', 'sk', { timestamp => $between });
	is($b->{partitions}[0]{committed}, 1, 'forwards again to the second push');
	is_deeply(drain('sk', 'g1'), [qw(sk-b-0 sk-b-1)], 'which is what the next pop gets');
	($s, $b) = seek_group('g1', 'sk', { timestamp => $long_ago });
	is_deeply(drain('sk', 'g1'), [qw(sk-a-0 sk-a-1 sk-b-0 sk-b-1)], 'back at the start');
	seek_group('g1', 'sk', { timestamp => $long_ago });
	($s, $b) = seek_group('g1', 'sk', { toEnd => jtrue });
	is($s, 200, 'seek toEnd');
	is_true($b->{seekToEnd}, 'seekToEnd echoed');
	is($b->{partitions}[0]{committed}, 3, 'committed = last offset');
	($s) = $q->pop('sk', consumerGroup => 'g1');
	is($s, 204, 'nothing left to deliver');
	seek_group('g1', 'sk', { timestamp => $long_ago });
	($s, $b) = seek_group('g1', 'sk', { timestamp => iso_ms(time + 3600) });
	is($b->{partitions}[0]{committed}, 3, 'a timestamp after every segment means the end');
};

subtest 'a seek moves exactly one group and creates its cursor when absent' => sub {
	my ($s, $b) = $q->pop('sk', consumerGroup => 'g2', subscriptionMode => 'all', batch => 2);
	$q->ack_all($b);
	is(committed_of('g2', 'sk'), 1, 'g2 at 1');
	seek_group('g1', 'sk', { timestamp => $long_ago });
	seek_group('g1', 'sk', { toEnd => jtrue });
	is(committed_of('g2', 'sk'), 1, 'g2 did not move when g1 did');
	is_deeply(drain('sk', 'g2'), [qw(sk-b-0 sk-b-1)], 'and goes on where it was');

	($s) = $q->get('/api/v1/consumer-groups/fresh');
	is($s, 404, 'group fresh is unknown');
	($s, $b) = seek_group('fresh', 'sk', { timestamp => $between });
	is($s, 200, 'seek of a group that never popped');
	is($b->{partitionsUpdated}, 1, 'its cursor was created');
	is(committed_of('fresh', 'sk'), 1, 'at the boundary');
	is_deeply(drain('sk', 'fresh'), [qw(sk-b-0 sk-b-1)], 'and its first pop starts there');
};

subtest 'a seek releases a live lease: the batch is abandoned, not acked' => sub {
	my ($s, $b) = $q->pop('sk', consumerGroup => 'g3', subscriptionMode => 'all', batch => 10,
		leaseSeconds => 600);
	is(scalar @{ $b->{messages} }, 4, 'g3 holds the four messages under a 10-minute lease');
	($s) = $q->pop('sk', consumerGroup => 'g3');
	is($s, 204, 'the lease keeps the partition');
	seek_group('g3', 'sk', { timestamp => $between });
	my ($s2, $b2) = $q->pop('sk', consumerGroup => 'g3', batch => 10);
	is($s2, 200, 'right after the seek the group pops again');
	is_deeply(txns($b2), [qw(sk-b-0 sk-b-1)], 'from the new position');
	is($b2->{messages}[0]{deliveryAttempt}, 1, 'as a first delivery');
	my (undef, $r) = $q->ack_all($b);
	# Items 0 and 1 are at or below the new cursor: completed there is a noop (SPEC 21).
	is_true($r->[0]{noop}, 'sk-a-0 is below the new cursor: a noop');
	is_false($r->[2]{success}, 'sk-b-0 under the abandoned lease is refused');
	like($r->[2]{error} // '', qr/lease/, 'because its lease is gone');
	is(committed_of('g3', 'sk'), 1, 'and did not move the cursor');
};

subtest 'a seek resets the retry budget' => sub {
	is(($q->configure('rb', retryLimit => 1))[0], 200, 'retryLimit 1');
	$q->push_n('rb', 2);
	my ($s, $b) = $q->pop('rb', consumerGroup => 'g4', subscriptionMode => 'all', batch => 1);
	my (undef, $r) = $q->ack_all($b, 'failed');
	is_false($r->[0]{dlq}, 'first failed nack of rb-m-0 redelivers (budget now spent)');
	($s, $b) = $q->pop('rb', consumerGroup => 'g4', batch => 1);
	is($b->{messages}[0]{deliveryAttempt}, 2, 'second delivery of rb-m-0');
	($s) = seek_group('g4', 'rb', { timestamp => $long_ago });
	is($s, 200, 'seek to the same place, releasing that lease');
	($s, $b) = $q->pop('rb', consumerGroup => 'g4', batch => 1);
	is_deeply(txns($b), ['rb-m-0'], 'rb-m-0 again');
	is($b->{messages}[0]{deliveryAttempt}, 1, 'counted as a first delivery');
	(undef, $r) = $q->ack_all($b, 'failed');
	is_true($r->[0]{success}, 'failed nack accepted');
	is_false($r->[0]{dlq}, 'and redelivered, not dead-lettered: the budget started over');
	my (undef, $d) = $q->get('/api/v1/dlq', { queue => 'rb' });
	is($d->{total}, 0, 'no dead letter');
};

subtest 'partition route: one partition, empty body = end' => sub {
	$q->push_n('pr', 2, partition => 'p1', prefix => 'p1');
	$q->push_n('pr', 2, partition => 'p2', prefix => 'p2');
	my ($s, $b) = seek_group('g5', 'pr', undef, 'p1');
	is($s, 200, 'seek with no body');
	is($b->{partitionsUpdated}, 1, 'one partition');
	is($b->{partitions}[0]{partition}, 'p1', 'p1');
	is($b->{partitions}[0]{committed}, 1, 'at its end');
	($s, $b) = seek_group('g5', 'pr', {}, 'p1');
	is($s, 200, 'an empty object is the end too');
	($s, $b) = $q->pop('pr', consumerGroup => 'g5', subscriptionMode => 'all', batch => 10,
		partitions => 2);
	is_deeply([ sort @{ txns($b) } ], [qw(p2-0 p2-1)], 'only p2 delivers; p1 is skipped');
	$q->ack_all($b);
	($s, $b) = seek_group('g5', 'pr', { timestamp => $long_ago }, 'p1');
	is($b->{partitions}[0]{committed}, -1, 'timestamp on the partition route');
	is(committed_of('g5', 'pr', 'p2'), 1, 'p2 untouched');
	($s, $b) = $q->pop('pr', consumerGroup => 'g5', batch => 10, partitions => 2);
	is_deeply(txns($b), [qw(p1-0 p1-1)], 'p1 delivers from its start');
};

subtest 'never below the log start' => sub {
	$q->push_n('ls', 3);
	# Retention moves log_start before it deletes segments; play that part by hand.
	$pg->psql("UPDATE queen_partitions SET log_start = 2 WHERE queue_id = " .
		"(SELECT id FROM queen_queues WHERE name = 'ls')");
	my ($s, $b) = seek_group('g6', 'ls', { timestamp => $long_ago });
	is($s, 200, 'seek before the log start');
	is($b->{partitions}[0]{committed}, 1, 'committed = log start - 1');
	($s, $b) = $q->pop('ls', consumerGroup => 'g6');
	is_deeply(offsets($b), [2], 'the pop starts at the log start');
};

subtest 'a seek wakes a pop parked for the group' => sub {
	# A queue of its own: the index keeps a few groups per partition, and a partition with
	# more groups than that is re-polled every second, which would hide a missing wakeup.
	$q->push_n('wq', 2);
	seek_group('g7', 'wq', { toEnd => jtrue });
	my $lp = bg(sub {
		my ($s, $b) = $q->pop('wq', consumerGroup => 'g7', wait => 'true', timeout => 30000,
			batch => 10);
		return { status => $s, txns => txns($b), at => time };
	});
	ok(wait_until(sub { ((($q->get('/metrics'))[1] // {})->{longPoll}{parked} // 0) >= 1 }, 20),
		'the pop is parked');
	my $t0 = time;
	seek_group('g7', 'wq', { timestamp => $long_ago });
	my $r = $lp->result(45);
	is($r->{status}, 200, 'the parked pop answered with messages') or diag(explain $r);
	is_deeply($r->{txns}, [qw(wq-m-0 wq-m-1)], 'from the new position');
	ok(($r->{at} // 1e9) - $t0 < 10, sprintf('woken by the seek, not its timeout (%.2f s)',
		($r->{at} // 1e9) - $t0));
};

subtest 'errors: 400 and 404, and a rejected seek changes nothing' => sub {
	my $before = committed_of('g1', 'sk');
	for my $case ([ {}, 'an empty object' ], [ { toEnd => jfalse }, 'toEnd false alone' ],
		[ { timestamp => 'yesterday' }, 'a bad timestamp' ],
		[ { toEnd => jtrue, timestamp => $between }, 'both' ]) {
		my ($s, $b) = seek_group('g1', 'sk', $case->[0]);
		is($s, 400, "$case->[1] -> 400");
		ok(length($b->{error} // ''), "with an error: $b->{error}");
	}
	my ($s, $b) = seek_group('g1', 'sk', undef);
	is($s, 400, 'no body on the queue route -> 400');
	($s, $b) = $q->request('POST', '/api/v1/consumer-groups/g1/queues/sk/seek',
		'{"toEnd":"yes"}');
	is($s, 400, 'toEnd of the wrong type -> 400');
	like($b->{error}, qr/^bad body/, 'a bad body');
	is(committed_of('g1', 'sk'), $before, 'nothing moved');
	($s, $b) = seek_group('g1', 'nosuchqueue', { toEnd => jtrue });
	is($s, 404, 'unknown queue -> 404');
	is($b->{error}, 'Queue not found', 'Queue not found');
	($s, $b) = seek_group('g1', 'sk', { toEnd => jtrue }, 'nosuchpartition');
	is($s, 404, 'unknown partition -> 404');
	is($b->{error}, 'Partition not found', 'Partition not found');
	($s) = $q->get('/api/v1/consumer-groups/g1/queues/sk/seek');
	is($s, 405, 'GET on a seek route -> 405');
};

done_testing;
