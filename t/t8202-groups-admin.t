#!/usr/bin/perl
# Consumer groups (SPEC 10): the list per (group, queue) with lag and state, the lagging
# view, the per-partition detail, the stored start (subscription) and deleting a group so it
# starts afresh.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

sub groups {
	my ($s, $b) = $q->get('/api/v1/consumer-groups');
	is($s, 200, 'GET /api/v1/consumer-groups');
	return ref $b eq 'ARRAY' ? $b : [];
}

sub group_entry {
	my ($name, $queue) = @_;
	my ($e) = grep { $_->{name} eq $name && $_->{queueName} eq $queue } @{ groups() };
	return $e // {};
}

sub detail {
	my ($group) = @_;
	my ($s, $b) = $q->get("/api/v1/consumer-groups/$group");
	return ($s, $b);
}

sub lagging {
	my ($s, $b) = $q->get('/api/v1/consumer-groups/lagging', @_ ? {@_} : undef);
	is($s, 200, 'GET /api/v1/consumer-groups/lagging');
	return ref $b eq 'ARRAY' ? $b : [];
}

# A named group that has consumed (and acked) everything of $queue from the start.
sub consume_all {
	my ($queue, $group) = @_;
	my ($s, $b) = $q->pop($queue, consumerGroup => $group, subscriptionMode => 'all',
		batch => 100);
	$q->ack_all($b) if $s == 200;
	return $s == 200 ? txns($b) : [];
}

$q->push_n('ga', 3);
my ($s, $b) = $q->pop('ga', consumerGroup => 'g1', subscriptionMode => 'all', batch => 1);
$q->ack_all($b);

subtest 'the list: one entry per (group, queue)' => sub {
	my $e = group_entry('g1', 'ga');
	is($e->{name}, 'g1', 'name');
	is($e->{queueName}, 'ga', 'queueName');
	is($e->{partitionCursors}, 1, 'partitionCursors');
	is($e->{partitionsWithLag}, 1, 'partitionsWithLag');
	is($e->{totalLag}, 2, 'totalLag: two messages past the cursor');
	ok(defined $e->{maxTimeLag} && $e->{maxTimeLag} =~ /^\d+$/ && $e->{maxTimeLag} < 300,
		'maxTimeLag in whole seconds, small: ' . ($e->{maxTimeLag} // 'undef'));
	is($e->{state}, 'Stable', 'state Stable');
	is($e->{subscriptionMode}, 'all', 'subscriptionMode');
	is_null($e, 'subscriptionTimestamp', 'no subscriptionTimestamp for all');
	$q->push_n('gb', 1);
	$q->pop('gb', consumerGroup => 'g1', subscriptionMode => 'new');
	my $e2 = group_entry('g1', 'gb');
	is($e2->{subscriptionMode}, 'new', 'a second queue of the same group is its own entry');
	like($e2->{subscriptionTimestamp} // '', iso_re, 'new: the stored start is a time');
	is($e2->{totalLag}, 0, 'new skipped the backlog: no lag');
};

subtest 'the detail: per queue, per partition' => sub {
	my ($s, $d) = detail('g1');
	is($s, 200, 'GET /api/v1/consumer-groups/g1');
	is_deeply([ sort keys %$d ], [qw(ga gb)], 'keyed by the queues the group reads');
	my $p = $d->{ga}{partitions}[0] // {};
	is($p->{partition}, 'Default', 'partition');
	like($p->{partitionId} // '', qr/^[0-9a-f-]{36}$/, 'partitionId');
	is($p->{committed}, 0, 'committed');
	is($p->{lag}, 2, 'lag');
	is_false($p->{leaseActive}, 'no lease');
	my ($s2, $b2) = $q->pop('ga', consumerGroup => 'g1', batch => 1);
	(undef, $d) = detail('g1');
	is_true($d->{ga}{partitions}[0]{leaseActive}, 'after a pop: lease active');
	$q->ack_all($b2);
	(undef, $d) = detail('g1');
	is($d->{ga}{partitions}[0]{committed}, 1, 'after the ack: committed 1');
	is_false($d->{ga}{partitions}[0]{leaseActive}, 'and the lease is gone');
	my ($s3, $e) = detail('nobody');
	is($s3, 404, 'unknown group -> 404');
	is($e->{error}, 'Consumer group not found', 'with a message');
};

subtest 'Lagging: the oldest unconsumed message is older than 300 s' => sub {
	# Age the log of ga by ten minutes (the API cannot make time pass).
	$pg->psql("UPDATE queen_segments SET created_at = created_at - interval '10 minutes' " .
		"WHERE partition_id IN (SELECT p.id FROM queen_partitions p JOIN queen_queues q " .
		"ON q.id = p.queue_id WHERE q.name = 'ga')");
	my $e = group_entry('g1', 'ga');
	is($e->{state}, 'Lagging', 'state Lagging');
	ok($e->{maxTimeLag} >= 600, "maxTimeLag $e->{maxTimeLag} >= 600");
	my @l = grep { $_->{consumer_group} eq 'g1' } @{ lagging(minLagSeconds => 300) };
	is(scalar @l, 1, 'minLagSeconds=300 lists g1 on ga');
	is($l[0]{queue_name}, 'ga', 'queue_name');
	is($l[0]{partition_name}, 'Default', 'partition_name');
	is($l[0]{offset_lag}, 1, 'offset_lag');
	ok($l[0]{time_lag_seconds} >= 600, 'time_lag_seconds');
	is(scalar(grep { $_->{consumer_group} eq 'g1' } @{ lagging(minLagSeconds => 3600) }), 0,
		'minLagSeconds=3600 does not');
	is(scalar(grep { $_->{consumer_group} eq 'g1' } @{ lagging() }), 0,
		'nor does the default (3600)');
	for my $bad ('abc', '-1') {
		my ($s, $b) = $q->get('/api/v1/consumer-groups/lagging', { minLagSeconds => $bad });
		is($s, 400, "minLagSeconds=$bad -> 400");
	}
};

subtest 'Dead: lag, no lease and no cursor activity for an hour' => sub {
	$pg->psql("UPDATE queen_cursors SET updated_at = now() - interval '2 hours' " .
		"WHERE group_name = 'g1'");
	$pg->psql("UPDATE queen_subscriptions SET created_at = now() - interval '2 hours' " .
		"WHERE group_name = 'g1'");
	is(group_entry('g1', 'ga')->{state}, 'Dead', 'g1 on ga is Dead');
	is(group_entry('g1', 'gb')->{state}, 'Stable', 'g1 on gb has no lag: Stable');
	my ($s, $b) = $q->pop('ga', consumerGroup => 'g1', batch => 1);
	is($s, 200, 'the group pops again');
	is(group_entry('g1', 'ga')->{state}, 'Lagging', 'and is Lagging, not Dead');
	$q->ack_all($b);
};

subtest 'subscription: a new start for partitions the group has no cursor on' => sub {
	$q->push_items({ queue => 'sub', partition => 'A', transactionId => 'a0' });
	$q->push_items({ queue => 'sub', partition => 'B', transactionId => 'b0' });
	my ($s, $b) = $q->pop('sub', partition => 'B', consumerGroup => 'gs');
	is($s, 204, 'gs first touches sub (mode new) through partition B: nothing');
	my (undef, $d) = detail('gs');
	my ($pa) = grep { $_->{partition} eq 'A' } @{ $d->{sub}{partitions} // [] };
	is($pa->{lag}, 0, 'on A, where it has no cursor, the backlog does not count for it');
	is_false($pa->{hasCursor}, 'no cursor on A');
	($s, $b) = $q->post_json('/api/v1/consumer-groups/gs/subscription',
		{ subscriptionTimestamp => '2000-01-01T00:00:00.000Z' });
	is($s, 200, 'POST subscription');
	is_true($b->{success}, 'success');
	is($b->{rowsUpdated}, 1, 'one queue updated');
	is($b->{subscriptionTimestamp}, '2000-01-01T00:00:00.000Z', 'echoed');
	is(group_entry('gs', 'sub')->{subscriptionTimestamp}, '2000-01-01T00:00:00.000Z',
		'the list shows it');
	($s, $b) = $q->pop('sub', partition => 'A', consumerGroup => 'gs');
	is_deeply(txns($b), ['a0'], 'A, which had no cursor, now starts from then');
	($s) = $q->pop('sub', partition => 'B', consumerGroup => 'gs');
	is($s, 204, 'B, which had one, did not move');
	($s, $b) = $q->post_json('/api/v1/consumer-groups/nobody/subscription',
		{ subscriptionTimestamp => 'now' });
	is($s, 200, 'unknown group: 200');
	is($b->{rowsUpdated}, 0, 'nothing updated');
	for my $case ([ {}, 'missing subscriptionTimestamp' ],
		[ { subscriptionTimestamp => 'soon' }, 'a bad timestamp' ],
		[ { subscriptionTimestamp => 5 }, 'a number' ]) {
		($s, $b) = $q->post_json('/api/v1/consumer-groups/gs/subscription', $case->[0]);
		is($s, 400, "$case->[1] -> 400");
	}
	($s) = $q->post_json('/api/v1/consumer-groups/__QUEUE_MODE__/subscription',
		{ subscriptionTimestamp => 'now' });
	is($s, 400, '__QUEUE_MODE__ has no subscription -> 400');
	is(group_entry('gs', 'sub')->{subscriptionTimestamp}, '2000-01-01T00:00:00.000Z',
		'the rejected requests changed nothing');
};

subtest 'delete a group on one queue: it starts afresh there' => sub {
	$q->push_n('d1', 2);
	$q->push_n('d2', 2);
	is_deeply(consume_all('d1', 'g2'), [qw(d1-m-0 d1-m-1)], 'g2 read d1');
	is_deeply(consume_all('d2', 'g2'), [qw(d2-m-0 d2-m-1)], 'g2 read d2');
	my ($s, $b) = $q->del('/api/v1/consumer-groups/g2/queues/d1');
	is($s, 200, 'DELETE /api/v1/consumer-groups/g2/queues/d1');
	is_true($b->{success}, 'success');
	is($b->{deletedPartitions}, 1, 'deletedPartitions');
	is_true($b->{metadataDeleted}, 'metadataDeleted by default');
	my (undef, $d) = detail('g2');
	is_deeply([ sort keys %$d ], ['d2'], 'g2 is left on d2 only');
	is_deeply(consume_all('d1', 'g2'), [qw(d1-m-0 d1-m-1)],
		'a new first contact on d1 with mode all reads it all again');
	is_deeply(consume_all('d2', 'g2'), [], 'd2 is untouched');
	($s, $b) = $q->del('/api/v1/consumer-groups/g2/queues/nosuchqueue');
	is($s, 200, 'an unknown queue deletes nothing');
	is($b->{deletedPartitions}, 0, 'deletedPartitions 0');
};

subtest 'delete a whole group; deleteMetadata=false keeps the stored start' => sub {
	$q->push_n('d3', 2);
	is_deeply(consume_all('d3', 'keep'), [qw(d3-m-0 d3-m-1)], 'keep read d3 (mode all)');
	is_deeply(consume_all('d3', 'drop'), [qw(d3-m-0 d3-m-1)], 'drop read d3 (mode all)');
	my ($s, $b) = $q->del('/api/v1/consumer-groups/keep', { deleteMetadata => 'false' });
	is($s, 200, 'DELETE keep?deleteMetadata=false');
	is_false($b->{metadataDeleted}, 'metadataDeleted false');
	($s, $b) = $q->del('/api/v1/consumer-groups/drop');
	is($s, 200, 'DELETE drop');
	is($b->{deletedPartitions}, 1, 'its cursor is gone');
	($s) = detail('drop');
	is($s, 404, 'drop is unknown now');
	($s, $b) = $q->pop('d3', consumerGroup => 'keep', subscriptionMode => 'new', batch => 10);
	is_deeply(txns($b), [qw(d3-m-0 d3-m-1)], 'keep restarts from its stored start (all)');
	($s, $b) = $q->pop('d3', consumerGroup => 'drop', subscriptionMode => 'new', batch => 10);
	is($s, 204, 'drop is a new group: mode new skips the backlog');
	($s, $b) = $q->del('/api/v1/consumer-groups/keep', { deleteMetadata => 'maybe' });
	is($s, 400, 'deleteMetadata=maybe -> 400');
	(undef, $b) = detail('keep');
	ok($b->{d3}, 'and keep is still there');
};

done_testing;
