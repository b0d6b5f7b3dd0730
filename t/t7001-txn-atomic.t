#!/usr/bin/perl
# Transactions (SPEC 8, 21): a bundle of acks and pushes over several queues, partitions and
# groups commits whole, with one result per push item and per ack in body order; a duplicate
# push, an expired lease or an unknown transactionId undoes all of it; a committed bundle
# wakes the pops parked on the queues it wrote.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;
use Time::HiRes qw(time);

start_pg();
my $q = start_queend();

# POSTs a bundle; returns the answer (the test fails unless the status is 200).
# The ack operation of a popped message, under its lease, for its group.
sub ack_op {
	my ($m, %o) = @_;
	return { type => 'ack', transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, consumerGroup => $m->{consumerGroup}, status => 'completed', %o };
}

# Committed offset of $group on the partitions of $queue (partition name => committed).
sub committed {
	my ($queue, $group) = @_;
	my ($s, $b) = $q->get("/api/v1/resources/queues/$queue/depth", $group ? { group => $group } : undef);
	return { map { $_->{name} => $_->{committed} } @{ ($b // {})->{partitions} // [] } };
}

sub queue_exists { ($q->get("/api/v1/resources/queues/$_[0]"))[0] == 200 }

subtest 'N to M: acks from two queues and groups, pushes to three partitions, one commit' => sub {
	$q->push_n('src-a', 2);
	$q->push_n('src-b', 1, partition => 'pb');
	my (undef, $pa) = $q->pop('src-a', batch => 2, consumerGroup => 'stage', subscriptionMode => 'all');
	my (undef, $pb) = $q->pop('src-b', batch => 1);
	is(scalar @{ $pa->{messages} // [] }, 2, 'two messages leased from src-a by group stage');
	is(scalar @{ $pb->{messages} // [] }, 1, 'one leased from src-b in queue mode');
	my ($a0, $a1) = @{ $pa->{messages} };
	my ($b0) = @{ $pb->{messages} };

	my $r = $q->transaction({ operations => [
		ack_op($a0),
		{ type => 'push', items => [
			{ queue => 'dst-x', partition => 'p1', payload => { from => 'a0' }, transactionId => 'x-1' },
			{ queue => 'dst-x', partition => 'p2', data => { from => 'a0' } } ] },
		ack_op($b0),
		{ type => 'push', queue => 'dst-y', payload => [ 1, 2, 3 ], transactionId => 'y-1',
		  traceId => 'trace-7' },
		ack_op($a1),
	] }, 'bundle');
	is_true($r->{success}, 'success');
	like($r->{transactionId} // '', uuid_re, 'the bundle has a UUIDv7 transactionId');
	my @res = @{ $r->{results} // [] };
	is(scalar @res, 6, 'one result per push item and per ack');
	is_deeply([ map { $_->{type} } @res ], [qw(ack push push ack push ack)], 'in body order, push items flattened');
	is_deeply([ map { $_->{index} } @res ], [ 0 .. 5 ], 'index is the position in results');
	ok(!grep({ !(JSON::PP::is_bool($_->{success}) && $_->{success}) } @res), 'every result succeeded');
	is_deeply([ map { $_->{transactionId} } @res[0, 1, 3, 4, 5] ],
		[ $a0->{transactionId}, 'x-1', $b0->{transactionId}, 'y-1', $a1->{transactionId} ],
		'transactionIds echoed');
	like($res[2]{transactionId} // '', uuid_re, 'a push without transactionId gets its message id');
	is($res[2]{transactionId}, $res[2]{messageId}, '... as its transactionId');
	is_deeply([ map { $_->{queueName} } @res[1, 2, 4] ], [qw(dst-x dst-x dst-y)], 'queueName');
	like($_->{messageId} // '', uuid_re, "messageId of result $_->{index}") for @res[1, 2, 4];
	is($res[0]{consumerGroup}, 'stage', 'ack result names its group');
	is($res[3]{consumerGroup}, '__QUEUE_MODE__', 'queue mode by default');
	is($res[3]{partitionId}, $b0->{partitionId}, 'ack result names its partition');
	is_true($res[5]{leaseReleased}, 'the last ack of the batch releases the lease');
	is_false($res[0]{noop}, 'noop false');

	is_deeply(committed('src-a', 'stage'), { Default => 1 }, 'src-a: group stage committed both');
	is_deeply(committed('src-b'), { pb => 0 }, 'src-b: committed');
	my (undef, $x1) = $q->pop('dst-x', partition => 'p1');
	my (undef, $x2) = $q->pop('dst-x', partition => 'p2');
	my (undef, $y) = $q->pop('dst-y');
	is_deeply([ map { $_->{data} } map { @{ $_->{messages} // [] } } $x1, $x2, $y ],
		[ { from => 'a0' }, { from => 'a0' }, [ 1, 2, 3 ] ], 'every push is stored (payload and its alias data)');
	is($x1->{messages}[0]{id}, $res[1]{messageId}, 'the stored message has the id the result gave');
	is($y->{messages}[0]{traceId}, 'trace-7', 'traceId stored');
	is($y->{messages}[0]{transactionId}, 'y-1', 'transactionId stored');
};

subtest 'a duplicate push undoes the whole bundle; the input stays leased and unacked' => sub {
	my $orig = $q->push_items({ queue => 'dst-d', transactionId => 'already-there', payload => 0 });
	my (undef, $o) = $q->push_items({ queue => 'dst-d', transactionId => 'already-there', payload => 0 });
	is($o->[0]{status}, 'duplicate', 'the key is live in the dedup window');
	$q->push_n('in-d', 1);
	my (undef, $p) = $q->pop('in-d', leaseSeconds => 120);
	my $m = $p->{messages}[0];

	my $body = { operations => [
		ack_op($m),
		{ type => 'push', queue => 'fresh-d', transactionId => 'new-1', payload => 1 },
		{ type => 'push', items => [ { queue => 'dst-d', transactionId => 'new-2' },
			{ queue => 'dst-d', transactionId => 'already-there' } ] },
	] };
	my $r = $q->transaction($body, 'bundle with a duplicate');
	is_false($r->{success}, 'success false');
	is($r->{reason}, 'duplicate', 'reason duplicate');
	like($r->{error} // '', qr/already-there/, "error names the transactionId: $r->{error}");
	is($r->{failedIndex}, 3, 'failedIndex: the fourth result');
	like($r->{messageId} // '', uuid_re, 'messageId of the message it duplicates');
	is_deeply($r->{results}, [], 'results empty');
	like($r->{transactionId} // '', uuid_re, 'transactionId still given');

	ok(!queue_exists('fresh-d'), 'the queue a push would have created does not exist');
	my (undef, $d) = $q->get('/api/v1/resources/queues/dst-d/depth');
	is($d->{totalMessages}, 1, 'dst-d holds only the original message (new-2 rolled back)');
	is_deeply(committed('in-d'), { Default => -1 }, 'the input is not acked');

	# Without the duplicate the same lease is still good: nothing was consumed.
	pop @{ $body->{operations}[2]{items} };
	$r = $q->transaction($body, 'same bundle without the duplicate');
	is_true($r->{success}, 'commits under the same lease');
	is_deeply(committed('in-d'), { Default => 0 }, 'now the input is acked');
};

subtest 'an expired lease: ack_rejected, nothing written' => sub {
	$q->push_n('in-e', 2);
	my (undef, $p) = $q->pop('in-e', batch => 1, leaseSeconds => 1);
	my $m = $p->{messages}[0];
	my $t0 = time;
	wait_until(sub { time > $t0 + 2.5 }, 10, 0.1);
	my $r = $q->transaction({ operations => [ ack_op($m),
		{ type => 'push', queue => 'out-e', transactionId => 'e-1', payload => 1 } ] }, 'late bundle');
	is_false($r->{success}, 'success false');
	is($r->{reason}, 'ack_rejected', 'reason ack_rejected');
	is($r->{failedIndex}, 0, 'failedIndex names the ack');
	is($r->{ackError}, 'invalid or expired lease', 'ackError says why');
	like($r->{error} // '', qr/in-e-m-0.*invalid or expired lease/, "error: $r->{error}");
	ok(!queue_exists('out-e'), 'no output written');
	is_deeply(committed('in-e'), { Default => -1 }, 'input not acked');
	my (undef, $again) = $q->pop('in-e', batch => 1);
	is_deeply(txns($again), ['in-e-m-0'], 'the message redelivers');
	is($again->{messages}[0]{deliveryAttempt}, 2, 'as a second attempt');
};

subtest 'an unknown transactionId: ack_rejected, nothing written' => sub {
	$q->push_n('in-u', 1);
	my (undef, $p) = $q->pop('in-u');
	my $m = $p->{messages}[0];
	my $r = $q->transaction({ operations => [ ack_op($m),
		ack_op($m, transactionId => 'no-such-message'),
		{ type => 'push', queue => 'out-u', payload => 1 } ] }, 'bundle acking a ghost');
	is($r->{reason}, 'ack_rejected', 'ack_rejected');
	is($r->{failedIndex}, 1, 'the second ack');
	ok(!queue_exists('out-u'), 'no output written');
	is_deeply(committed('in-u'), { Default => -1 }, 'the first ack is undone too');
};

subtest 'nacks in a bundle: failed and dlq apply like /ack' => sub {
	$q->push_n('in-n', 2);
	my (undef, $p) = $q->pop('in-n', batch => 1);
	my $r = $q->transaction({ operations => [ ack_op($p->{messages}[0], status => 'failed', error => 'bad input'),
		{ type => 'push', queue => 'out-n', payload => 'compensation' } ] }, 'failed nack');
	is_true($r->{success}, 'commits');
	is_true($r->{results}[0]{leaseReleased}, 'a failed nack releases the lease');
	my (undef, $again) = $q->pop('in-n', batch => 1);
	is_deeply(txns($again), ['in-n-m-0'], 'the head redelivers');
	$r = $q->transaction({ operations => [ ack_op($again->{messages}[0], status => 'dlq', error => 'poison') ] }, 'dlq');
	is_true($r->{results}[0]{dlq}, 'dead-lettered');
	my (undef, $d) = $q->get('/api/v1/dlq', { queue => 'in-n' });
	is($d->{messages}[0]{errorMessage}, 'poison', 'dead letter with the reason given');
	$r = $q->transaction({ operations => [ ack_op($again->{messages}[0], status => 'bogus') ] }, 'bad status');
	is($r->{reason}, 'ack_rejected', 'an unknown status rejects the bundle, as /ack fails the item');
	like($r->{ackError} // '', qr/completed, failed, retry or dlq/, 'naming the statuses accepted');
};

subtest 'a committed bundle wakes a pop parked on its output queue' => sub {
	my $parked = bg(sub {
		my $t0 = time;
		my ($s, $b) = $q->pop('out-w', wait => 'true', timeout => 20000);
		return { status => $s, txns => txns($b), secs => time - $t0 };
	});
	# Until it is parked (a bundle landing before that is found by the pop's query anyway).
	wait_until(sub { ((($q->get('/metrics'))[1] // {})->{longPoll} // {})->{parked} }, 10);
	my $r = $q->transaction({ operations => [ { type => 'push', queue => 'out-w', transactionId => 'w-1' } ] }, 'push');
	is_true($r->{success}, 'commits');
	my $got = $parked->result(30);
	is($got->{status}, 200, 'the parked pop answers');
	is_deeply($got->{txns}, ['w-1'], 'with the message');
	cmp_ok($got->{secs}, '<', 15, "well before its timeout ($got->{secs} s)");
};

done_testing;
