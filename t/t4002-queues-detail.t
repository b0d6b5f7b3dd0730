#!/usr/bin/perl
# Queue inspection and deletion (SPEC 9, 16, 21): detail with partitions[], depth by offset
# arithmetic, the operator lists, DELETE with {"deleted","existed"}, 404 for an unknown queue.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

$q->push_n('det', 3, partition => 'p1', prefix => 'one');
$q->push_n('det', 2, partition => 'p2', prefix => 'two');
my (undef, $pop1) = $q->pop('det', partition => 'p1', batch => 1);
$q->ack_all($pop1);

# The depth answer's shape is the broker's choice; find the pending count of one partition
# wherever it is: a hash naming the partition and carrying a pending/depth number.
sub pending_of {
	my ($node, $part) = @_;
	if (ref $node eq 'HASH') {
		my $name = $node->{partition} // $node->{name} // $node->{partitionName};
		if (defined $name && !ref $name && $name eq $part) {
			my ($k) = grep { /pending|depth/i && defined $node->{$_} && !ref $node->{$_} }
				sort keys %$node;
			return $node->{$k} if $k;
		}
		for (sort keys %$node) { my $v = pending_of($node->{$_}, $part); return $v if defined $v }
	} elsif (ref $node eq 'ARRAY') {
		for (@$node) { my $v = pending_of($_, $part); return $v if defined $v }
	}
	return undef;
}

subtest 'detail: options and partitions with name, id, logStart, logEnd, messages' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/queues/det');
	is($s, 200, 'GET /api/v1/resources/queues/det');
	ok(ref $d->{options} eq 'HASH', 'options');
	my %p = map { $_->{name} => $_ } @{ $d->{partitions} // [] };
	is_deeply([ sort keys %p ], [qw(p1 p2)], 'partitions p1 and p2');
	is($p{p1}{id}, $pop1->{partitionId}, 'p1 id is the partitionId pop gave');
	ok(defined $p{p2}{id} && $p{p2}{id} ne $p{p1}{id}, 'p2 has its own id');
	is($p{p1}{messages}, 3, 'p1 holds 3 messages');
	is($p{p2}{messages}, 2, 'p2 holds 2 messages');
	is($p{p1}{logStart}, 0, 'p1 logStart 0');
	ok(($p{p1}{logEnd} // -1) == 3 || ($p{p1}{logEnd} // -1) == 2,
		'p1 logEnd is the end of offsets 0..2 (' . ($p{p1}{logEnd} // 'undef') . ')');
	ok(($p{p2}{logEnd} // 0) == $p{p1}{logEnd} - 1, 'p2 logEnd one less: counted the same way');
};

subtest 'depth: pending per partition, per group' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/queues/det/depth', { group => '__QUEUE_MODE__' });
	is($s, 200, 'depth?group=__QUEUE_MODE__');
	is(pending_of($d, 'p1'), 2, 'p1: 3 pushed, 1 acked, 2 pending') or diag(explain $d);
	is(pending_of($d, 'p2'), 2, 'p2: 2 pending');
	($s) = $q->get('/api/v1/resources/queues/det/depth');
	is($s, 200, 'depth without group');
	($s, $d) = $q->get('/api/v1/resources/queues/nope/depth');
	is($s, 404, 'depth of an unknown queue: 404');
};

subtest 'the operator views list the queue' => sub {
	my $e = find_queue($q, 'det');
	ok($e, '/api/v1/resources/queues lists det') or return;
	is($e->{partitions}, 2, 'partitions 2');
	is($e->{messages}, 5, 'messages 5');
	ok(exists $e->{pending}, 'pending');
	ok(exists $e->{namespace} && exists $e->{task}, 'namespace and task');
	for my $path (qw(/api/v1/resources/overview /api/v1/resources/namespaces
		/api/v1/resources/tasks /api/v1/status /api/v1/status/queues))
	{
		my ($s, $j, $h) = $q->get($path);
		is($s, 200, "GET $path");
		ok(ref $j, "$path answers JSON");
	}
};

subtest 'unknown queue: 404 {"error":"Queue not found"}' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/queues/nope');
	is($s, 404, 'status 404');
	is($d->{error}, 'Queue not found', 'Queue not found');
};

subtest 'delete: partitions, messages, cursors and dead letters go' => sub {
	my (undef, $b) = $q->pop('det', partition => 'p2', batch => 1);
	my (undef, $r) = $q->ack_all($b, 'dlq');
	is_true($r->[0]{dlq}, 'a dead letter in det');
	my ($s, $d) = $q->del('/api/v1/resources/queues/det');
	is($s, 200, 'DELETE 200');
	is_deeply($d, { deleted => jtrue, existed => jtrue }, '{"deleted":true,"existed":true}');
	($s, $d) = $q->get('/api/v1/resources/queues/det');
	is($s, 404, 'gone');
	is($d->{error}, 'Queue not found', 'Queue not found');
	($s) = $q->pop('det');
	is($s, 204, 'pop: 204');
	(undef, $d) = $q->get('/api/v1/dlq', { queue => 'det' });
	is($d->{total}, 0, 'its dead letters are gone');
	ok(!find_queue($q, 'det'), 'no longer listed');
	($s, $d) = $q->del('/api/v1/resources/queues/det');
	is($s, 200, 'DELETE again: 200');
	is_deeply($d, { deleted => jfalse, existed => jfalse }, '{"deleted":false,"existed":false}');
};

subtest 'a queue pushed to after its deletion starts afresh' => sub {
	my ($s, $b) = $q->push_items({ queue => 'det', partition => 'p1', transactionId => 'one-0' });
	is($b->[0]{status}, 'queued', 'the old transactionId is not a duplicate');
	(undef, $b) = $q->pop('det', partition => 'p1');
	is_deeply(offsets($b), [0], 'offsets start at 0 again');
	is($b->{messages}[0]{deliveryAttempt}, 1, 'no old cursor state');
};

done_testing;
