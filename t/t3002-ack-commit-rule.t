#!/usr/bin/perl
# The commit rule (SPEC 6): an ack moves the group's cursor to the highest completed offset
# below the lowest nack; what is above the nack redelivers; a partial ack keeps the lease.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub ack_items {
	my ($pop, %status) = @_;
	my @acks = map { +{ transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
		leaseId => $_->{leaseId}, status => $status{ $_->{offset} } } }
		grep { exists $status{ $_->{offset} } } @{ $pop->{messages} };
	my ($s, $r) = $q->ack_batch($pop->{consumerGroup}, @acks);
	is($s, 200, 'ack batch: ' . join(', ', map { "$_ $status{$_}" } sort { $a <=> $b } keys %status));
	return $r;
}

subtest 'the SPEC example: committed 6; 7 completed, 8 failed, 9 completed -> committed 7' => sub {
	$q->push_n('clamp', 10);
	my ($s, $b) = $q->pop('clamp', batch => 7);
	is_deeply(offsets($b), [ 0 .. 6 ], 'offsets 0..6');
	ack_items($b, map { $_ => 'completed' } 0 .. 6);
	($s, $b) = $q->pop('clamp', batch => 10);
	is_deeply(offsets($b), [ 7, 8, 9 ], 'committed is 6: the next pop starts at 7');
	my $r = ack_items($b, 7 => 'completed', 8 => 'failed', 9 => 'completed');
	is_true($r->[0]{success}, '7 completed');
	is_true($r->[1]{success}, '8 failed is accepted as a nack');
	($s, $b) = $q->pop('clamp', batch => 10);
	is($s, 200, 'the nack released the lease');
	is_deeply(offsets($b), [ 8, 9 ], 'committed is 7: the next pop starts at 8, 9 redelivers');
};

subtest 'a partial ack keeps the lease for the rest of the batch' => sub {
	$q->push_n('partial', 4);
	my ($s, $b) = $q->pop('partial', batch => 4);
	my $r = ack_items($b, 0 => 'completed', 1 => 'completed');
	is_false($r->[1]{leaseReleased}, 'lease not released at offset 1 of 3');
	($s) = $q->pop('partial');
	is($s, 204, 'the rest of the batch is still leased');
	$r = ack_items($b, 2 => 'completed', 3 => 'completed');
	is_true($r->[1]{success}, 'the rest acked under the same lease');
	is_true($r->[1]{leaseReleased}, 'lease released when the cursor reached the batch end');
	$q->push_n('partial', 1, prefix => 'more');
	($s, $b) = $q->pop('partial');
	is_deeply(offsets($b), [4], 'the partition is free again and continues at 4');
};

subtest 'offsets not mentioned below a completed one count as completed' => sub {
	$q->push_n('gap', 5);
	my ($s, $b) = $q->pop('gap', batch => 5);
	my $r = ack_items($b, 2 => 'completed');
	is_true($r->[0]{success}, 'ack of offset 2 alone');
	is_false($r->[0]{leaseReleased}, 'batch not done');
	$r = ack_items($b, 4 => 'completed');
	is_true($r->[0]{leaseReleased}, 'ack of offset 4 finishes the batch');
	($s) = $q->pop('gap');
	is($s, 204, '0..4 all committed: nothing redelivers');
	$r = ack_items($b, 1 => 'completed');
	is_true($r->[0]{noop}, 'a late ack of offset 1 is a noop');
};

subtest 'deliveryAttempt counts deliveries of a batch starting at the same offset' => sub {
	$q->push_n('att', 2);
	my ($s, $b) = $q->pop('att', batch => 2);
	is($b->{messages}[0]{deliveryAttempt}, 1, 'first delivery: 1');
	ack_items($b, 0 => 'retry');
	($s, $b) = $q->pop('att', batch => 2);
	is_deeply(offsets($b), [ 0, 1 ], 'retry redelivers from the head');
	is_deeply([ map { $_->{deliveryAttempt} } @{ $b->{messages} } ], [ 2, 2 ], 'attempt 2');
	ack_items($b, 0 => 'completed', 1 => 'retry');
	($s, $b) = $q->pop('att', batch => 2);
	is_deeply(offsets($b), [1], 'the batch now starts at 1');
	is($b->{messages}[0]{deliveryAttempt}, 1, 'a batch starting at a new offset is attempt 1');
	ack_items($b, 1 => 'retry');
	($s, $b) = $q->pop('att', batch => 2);
	is($b->{messages}[0]{deliveryAttempt}, 2, 'and its redelivery is attempt 2');
};

subtest 'one ack call over two partitions commits each (partition, group) on its own' => sub {
	$q->push_n('pair', 2, partition => $_, prefix => $_) for qw(left right);
	my ($s, $b) = $q->pop('pair', partitions => 2, batch => 10);
	is($b->{partitionsClaimed}, 2, 'one pop, two partitions');
	my %st = ('left-0' => 'completed', 'left-1' => 'completed', 'right-0' => 'completed',
		'right-1' => 'failed');
	my $r;
	($s, $r) = $q->ack_batch(undef, map { +{ transactionId => $_->{transactionId},
		partitionId => $_->{partitionId}, leaseId => $_->{leaseId},
		status => $st{ $_->{transactionId} } } } @{ $b->{messages} });
	is(scalar(grep { $_->{success} } @$r), 4, 'all four accepted');
	($s, $b) = $q->pop('pair', partitions => 2, batch => 10);
	is_deeply(txns($b), ['right-1'], 'left is done; right redelivers from its nack');
};

subtest 'a nack of several: the lowest is the head signal' => sub {
	$q->push_n('heads', 5);
	my ($s, $b) = $q->pop('heads', batch => 5);
	ack_items($b, 0 => 'completed', 3 => 'failed', 1 => 'retry', 4 => 'completed');
	($s, $b) = $q->pop('heads', batch => 5);
	is_deeply(offsets($b), [ 1, 2, 3, 4 ], 'committed 0: everything from 1 redelivers');
};

done_testing;
