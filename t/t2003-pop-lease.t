#!/usr/bin/perl
# Leases on pop (SPEC 1, 5, 6): one leased batch per (partition, group); an expired lease
# redelivers the whole span from committed + 1 with deliveryAttempt + 1, and costs no retry
# budget.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

# Pops until something is delivered (the lease in the way has expired); (status, body, secs).
sub pop_when_expired {
	my ($queue, %p) = @_;
	my $t0 = time;
	my ($s, $b);
	wait_until(sub { ($s, $b) = $q->pop($queue, %p); $s != 204 }, 8, 0.1);
	return ($s, $b, time - $t0);
}

subtest 'one leased batch per (partition, group)' => sub {
	$q->push_n('one', 3);
	my ($s, $b) = $q->pop('one', batch => 1);
	is_deeply(offsets($b), [0], 'first pop leases offset 0');
	($s) = $q->pop('one', batch => 1);
	is($s, 204, 'a second pop of the same group finds the partition leased: 204');
	my ($gs, $g) = $q->pop('one', consumerGroup => 'other', subscriptionMode => 'all', batch => 1);
	is_deeply(offsets($g), [0], 'another group is not blocked');
	$q->ack_all($b);
	($s, $b) = $q->pop('one', batch => 1);
	is_deeply(offsets($b), [1], 'after the ack the group moves on');

	$q->push_n('two', 1, partition => $_, prefix => $_) for qw(pa pb);
	my (undef, $b1) = $q->pop('two');
	my (undef, $b2) = $q->pop('two');
	($s) = $q->pop('two');
	is_deeply([ sort map { $_->{partition} } $b1, $b2 ], [qw(pa pb)],
		'with two partitions, two pops claim one each');
	is($s, 204, 'a third finds both leased');
};

subtest 'lease expiry redelivers the whole span, deliveryAttempt 2, no budget spent' => sub {
	my ($s) = $q->configure('exp', retryLimit => 1);
	is($s, 200, 'queue exp with retryLimit 1');
	$q->push_n('exp', 3);
	my $b;
	($s, $b) = $q->pop('exp', leaseSeconds => 1, batch => 10);
	is_deeply(offsets($b), [ 0, 1, 2 ], 'leased offsets 0..2 for 1 s');
	is_deeply([ map { $_->{deliveryAttempt} } @{ $b->{messages} } ], [ 1, 1, 1 ], 'attempt 1');
	my $first = $b;
	($s) = $q->pop('exp', leaseSeconds => 1);
	is($s, 204, 'while the lease lives: 204');

	my $secs;
	($s, $b, $secs) = pop_when_expired('exp', leaseSeconds => 1, batch => 10);
	is($s, 200, sprintf('redelivered after the lease expired (%.1f s)', $secs));
	is_deeply(offsets($b), [ 0, 1, 2 ], 'the whole span again');
	is_deeply([ map { $_->{id} } @{ $b->{messages} } ], [ map { $_->{id} } @{ $first->{messages} } ],
		'the same messages');
	is_deeply([ map { $_->{deliveryAttempt} } @{ $b->{messages} } ], [ 2, 2, 2 ],
		'deliveryAttempt 2');
	isnt($b->{leaseId}, $first->{leaseId}, 'under a new lease');

	($s, $b) = pop_when_expired('exp', leaseSeconds => 1, batch => 10);
	is($b->{messages}[0]{deliveryAttempt}, 3, 'expired again: deliveryAttempt 3');

	# Two expiries spent nothing: with retryLimit 1 the first failed nack still redelivers.
	my (undef, $r) = $q->ack_batch(undef, { transactionId => 'exp-m-0',
		partitionId => $b->{partitionId}, leaseId => $b->{leaseId}, status => 'failed' });
	is_true($r->[0]{success}, 'first failed nack accepted');
	is_false($r->[0]{dlq}, 'not dead-lettered: expiries did not spend the budget');
	($s, $b) = $q->pop('exp', batch => 10);
	is_deeply(offsets($b), [ 0, 1, 2 ], 'the nack redelivers from the head');
	is($b->{messages}[0]{deliveryAttempt}, 4, 'deliveryAttempt 4');
	(undef, $r) = $q->ack_batch(undef, { transactionId => 'exp-m-0',
		partitionId => $b->{partitionId}, leaseId => $b->{leaseId}, status => 'failed' });
	is_true($r->[0]{dlq}, 'the second failed nack dead-letters it');
	($s, $b) = $q->pop('exp', batch => 10);
	is_deeply(offsets($b), [ 1, 2 ], 'the group moves past the dead letter');
	is($b->{messages}[0]{deliveryAttempt}, 1, 'a batch starting at a new offset is attempt 1');
};

subtest 'a partial ack, then expiry: redelivery from committed + 1' => sub {
	$q->push_n('part', 3);
	my ($s, $b) = $q->pop('part', leaseSeconds => 1, batch => 10);
	my (undef, $r) = $q->ack_batch(undef, { transactionId => 'part-m-0',
		partitionId => $b->{partitionId}, leaseId => $b->{leaseId}, status => 'completed' });
	is_true($r->[0]{success}, 'offset 0 acked');
	is_false($r->[0]{leaseReleased}, 'the lease is kept for the rest of the batch');
	($s) = $q->pop('part');
	is($s, 204, 'still leased: 204');
	($s, $b) = pop_when_expired('part', batch => 10);
	is_deeply(offsets($b), [ 1, 2 ], 'redelivered from offset 1');
	is($b->{messages}[0]{deliveryAttempt}, 1, 'a batch starting at a new offset is attempt 1');
};

subtest 'without leaseSeconds the queue\'s leaseTime applies' => sub {
	my ($s) = $q->configure('lt', leaseTime => 1);
	is($s, 200, 'leaseTime 1');
	$q->push_n('lt', 1);
	my $b;
	($s, $b) = $q->pop('lt');
	is($s, 200, 'popped without leaseSeconds');
	my $secs;
	($s, $b, $secs) = pop_when_expired('lt');
	is($s, 200, sprintf('redelivered after %.1f s', $secs));
	ok($secs < 5, 'the 1 s leaseTime was used, not 60 or 300');
	is($b->{messages}[0]{deliveryAttempt}, 2, 'deliveryAttempt 2');
};

done_testing;
