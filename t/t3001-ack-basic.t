#!/usr/bin/perl
# Ack (SPEC 6, 21): the answer's shape, the statuses accepted, and the items that fail
# inside a 200 (wrong lease, unknown transactionId, bad status, nack of committed).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();
$q->push_n('ack', 12);

my $BOGUS_LEASE = '01890a5d-ac96-774b-bcce-b302099a8057';

sub pop1 {
	my ($s, $b) = $q->pop('ack', @_);
	is($s, 200, 'popped ' . join(',', @{ txns($b) }));
	return $b;
}

sub ack1 {
	my (%f) = @_;
	my ($s, $b) = $q->post_json('/api/v1/ack', \%f);
	is($s, 200, "POST /api/v1/ack ($f{status}) answers 200");
	is(ref $b, 'ARRAY', 'an array');
	is(scalar @{ $b // [] }, 1, 'of one element');
	return $b->[0];
}

subtest 'a single ack answers an array of one, fully shaped' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed', consumerGroup => '__QUEUE_MODE__');
	is($r->{index}, 0, 'index 0');
	is($r->{transactionId}, 'ack-m-0', 'transactionId');
	is_true($r->{success}, 'success true');
	is_null($r, 'error', 'error null');
	is_true($r->{leaseReleased}, 'leaseReleased: the batch is done');
	is_false($r->{dlq}, 'dlq false');
	is_false($r->{noop}, 'noop false');

	$r = ack1(transactionId => 'ack-m-0', partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'acking it again: success');
	is_true($r->{noop}, 'noop: at or below the cursor, whatever its lease');
	$r = ack1(transactionId => 'ack-m-0', partitionId => $m->{partitionId}, status => 'failed');
	is_false($r->{success}, 'a nack of a committed message fails');
	like($r->{error} // '', qr/already committed/, 'already committed');
};

subtest 'a wrong lease fails the item and changes nothing' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $BOGUS_LEASE, status => 'completed');
	is_false($r->{success}, 'success false');
	like($r->{error} // '', qr/invalid or expired lease/, 'invalid or expired lease');
	my ($s) = $q->pop('ack');
	is($s, 204, 'the real lease still holds the partition');
	$r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'the right lease acks it');
};

subtest 'an unknown transactionId fails the item' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => 'no-such-message', partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_false($r->{success}, 'success false');
	ok(defined $r->{error} && length $r->{error}, "with an error: " . ($r->{error} // ''));
	$r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'the lease was untouched: the real ack works');
};

subtest 'an unknown status fails the item, naming the allowed values' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'bogus');
	is_false($r->{success}, 'success false');
	like($r->{error} // '', qr/$_/, "error names $_") for qw(completed failed retry dlq);
	$r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'nothing moved: the real ack works');
};

subtest 'success, acked and ok mean completed' => sub {
	my $b = pop1(batch => 3);
	my @st = qw(success acked ok);
	my ($s, $r) = $q->ack_batch(undef, map { +{ transactionId => $b->{messages}[$_]{transactionId},
		partitionId => $b->{partitionId}, leaseId => $b->{leaseId}, status => $st[$_] } } 0 .. 2);
	is($s, 200, 'ack batch');
	is_deeply([ map { $_->{index} } @$r ], [ 0, 1, 2 ], 'one element per item, in order');
	is_true($r->[$_]{success}, "$st[$_] accepted") for 0 .. 2;
	is_true($r->[2]{leaseReleased}, 'the batch is done');
	$b = pop1(batch => 1);
	is_deeply(txns($b), ['ack-m-7'], 'the cursor moved past all three');
	$q->ack_all($b);
};

subtest 'null optional fields are absent fields' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		status => 'completed', consumerGroup => undef, error => undef, leaseId => undef);
	is_true($r->{success}, 'consumerGroup, error and leaseId null: a lease-less __QUEUE_MODE__ ack');
	my ($s, $r2) = $q->post_json('/api/v1/ack/batch', { consumerGroup => undef,
		acknowledgments => [] });
	is($s, 200, 'batch with consumerGroup null and no items');
	is_deeply($r2, [], 'answers []');
	$b = pop1(batch => 1);
	is_deeply(txns($b), ['ack-m-9'], 'the cursor moved');
	$q->ack_all($b);
};

subtest 'without leaseId the cursor moves without a lease check' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		status => 'completed');
	is_true($r->{success}, 'lease-less ack');
	$b = pop1(batch => 1);
	is_deeply(txns($b), ['ack-m-11'], 'next message');
};

subtest 'a named group acks its own cursor only' => sub {
	my ($s, $b) = $q->pop('ack', consumerGroup => 'audit', subscriptionMode => 'all', batch => 2);
	my (undef, $r) = $q->ack_all($b);
	is_true($r->[$_]{success}, "audit acked $b->{messages}[$_]{transactionId}") for 0 .. 1;
	($s, $b) = $q->pop('ack', consumerGroup => 'audit', batch => 1);
	is_deeply(txns($b), ['ack-m-2'], 'audit moved on');
	($s, $b) = $q->pop('ack', consumerGroup => 'other', subscriptionMode => 'all', batch => 1);
	is_deeply(txns($b), ['ack-m-0'], 'another group did not');
};

done_testing;
