#!/usr/bin/perl
# Nacks and the retry budget (SPEC 6, 9, 11, 21): retryLimit N redelivers the first N
# failed nacks and dead-letters on the N+1-th; dlq dead-letters at once; retry spends
# nothing; dead-lettering off drops; a finished batch resets the budget.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

# Pops one message of $queue and nacks it with $status; returns (popped message, ack result).
sub pop_and_nack {
	my ($queue, $status, $error) = @_;
	my ($s, $b) = $q->pop($queue, batch => 1);
	my $m = $b->{messages}[0] // {};
	my (undef, $r) = $q->ack_batch(undef, { transactionId => $m->{transactionId},
		partitionId => $m->{partitionId}, leaseId => $m->{leaseId}, status => $status,
		(defined $error ? (error => $error) : ()) });
	return ($m, $r->[0] // {});
}

sub dlq {
	my (%query) = @_;
	my ($s, $b) = $q->get('/api/v1/dlq', \%query);
	is($s, 200, 'GET /api/v1/dlq ' . join('&', map { "$_=$query{$_}" } sort keys %query));
	return $b // {};
}

subtest 'retryLimit 2: two failed nacks redeliver, the third dead-letters' => sub {
	is(($q->configure('rl', retryLimit => 2))[0], 200, 'retryLimit 2');
	$q->push_n('rl', 2);
	for my $n (1 .. 2) {
		my ($m, $r) = pop_and_nack('rl', 'failed', "attempt $n failed");
		is($m->{transactionId}, 'rl-m-0', "nack $n of rl-m-0");
		is($m->{deliveryAttempt}, $n, "deliveryAttempt $n");
		is_true($r->{success}, 'accepted');
		is_false($r->{dlq}, 'not dead-lettered');
		is_true($r->{leaseReleased}, 'the lease is released so the head redelivers');
	}
	my ($m, $r) = pop_and_nack('rl', 'failed', 'boom');
	is($m->{deliveryAttempt}, 3, 'third delivery');
	is_true($r->{success}, 'third nack accepted');
	is_true($r->{dlq}, 'and dead-lettered');
	my ($s, $b) = $q->pop('rl', batch => 1);
	is_deeply(txns($b), ['rl-m-1'], 'the group moves past it');
	is($b->{messages}[0]{deliveryAttempt}, 1, 'the next message starts at attempt 1');

	my $d = dlq(queue => 'rl');
	is($d->{total}, 1, 'one dead letter');
	my $row = $d->{messages}[0] // {};
	ok(defined $row->{id} && length $row->{id}, 'with an id');
	is($row->{transactionId}, 'rl-m-0', 'transactionId');
	is($row->{queue}, 'rl', 'queue');
	is($row->{partition}, 'Default', 'partition');
	is($row->{partitionId}, $m->{partitionId}, 'partitionId');
	is($row->{consumerGroup}, '__QUEUE_MODE__', 'consumerGroup');
	is($row->{errorMessage}, 'boom', 'errorMessage is the nack\'s error');
	ok(defined $row->{retryCount} && $row->{retryCount} =~ /^\d+$/, "retryCount $row->{retryCount}");
	is_deeply($row->{data}, { i => 0 }, 'data is the payload');
	like($row->{createdAt}, iso_re, 'createdAt');
	like($row->{failedAt}, iso_re, 'failedAt');
	is_deeply($d->{pagination}, { limit => 100, offset => 0 }, 'pagination defaults');
	is(dlq(queue => 'rl', consumerGroup => '__QUEUE_MODE__')->{total}, 1, 'filter by group');
	is(dlq(queue => 'rl', consumerGroup => 'nobody')->{total}, 0, 'another group has none');
};

subtest 'status dlq dead-letters the head at once' => sub {
	$q->push_n('dq', 2);
	my ($m, $r) = pop_and_nack('dq', 'dlq', 'poison');
	is_true($r->{success}, 'accepted');
	is_true($r->{dlq}, 'dead-lettered');
	my ($s, $b) = $q->pop('dq', batch => 1);
	is_deeply(txns($b), ['dq-m-1'], 'the group is past it');
	my $d = dlq(queue => 'dq');
	is($d->{total}, 1, 'one dead letter');
	is($d->{messages}[0]{errorMessage}, 'poison', 'with the given reason');
};

subtest 'dead-lettering the head of a larger batch: the rest redelivers at once' => sub {
	$q->push_n('dqb', 3);
	my ($s, $b) = $q->pop('dqb', batch => 3);
	my (undef, $r) = $q->ack_batch(undef,
		{ transactionId => 'dqb-m-0', partitionId => $b->{partitionId}, leaseId => $b->{leaseId},
		  status => 'dlq', error => 'poison' },
		{ transactionId => 'dqb-m-1', partitionId => $b->{partitionId}, leaseId => $b->{leaseId},
		  status => 'completed' });
	is_true($r->[0]{dlq}, 'the head is dead-lettered');
	($s, $b) = $q->pop('dqb', batch => 3);
	is($s, 200, 'the lease was released: the next pop delivers');
	is_deeply(offsets($b), [ 1, 2 ], 'from past the dead letter; the completed above it redelivers');
};

subtest 'budget spent without an error text: "Retries exhausted"' => sub {
	is(($q->configure('rl0', retryLimit => 0))[0], 200, 'retryLimit 0');
	$q->push_n('rl0', 1);
	my ($m, $r) = pop_and_nack('rl0', 'failed');
	is_true($r->{dlq}, 'the first failed nack dead-letters');
	is(dlq(queue => 'rl0')->{messages}[0]{errorMessage}, 'Retries exhausted', 'default reason');
};

subtest 'retry redelivers without spending the budget' => sub {
	is(($q->configure('rt', retryLimit => 1))[0], 200, 'retryLimit 1');
	$q->push_n('rt', 2);
	for my $n (1 .. 3) {
		my ($m, $r) = pop_and_nack('rt', 'retry');
		is($m->{transactionId}, 'rt-m-0', "retry $n of rt-m-0");
		is_false($r->{dlq}, 'not dead-lettered');
	}
	my ($m, $r) = pop_and_nack('rt', 'failed');
	is($m->{deliveryAttempt}, 4, 'still rt-m-0, fourth delivery');
	is_false($r->{dlq}, 'the first failed nack redelivers: retries spent nothing');
	($m, $r) = pop_and_nack('rt', 'failed');
	is_true($r->{dlq}, 'the second dead-letters');
};

subtest 'dead-lettering off: the head message is dropped' => sub {
	is(($q->configure('drop', retryLimit => 1, deadLetterQueue => jfalse,
		dlqAfterMaxRetries => jfalse))[0], 200, 'retryLimit 1, dead-lettering off');
	$q->push_n('drop', 2);
	my ($m, $r) = pop_and_nack('drop', 'failed');
	is_false($r->{dlq}, 'first nack redelivers');
	($m, $r) = pop_and_nack('drop', 'failed');
	is($m->{transactionId}, 'drop-m-0', 'second nack of drop-m-0');
	is_true($r->{success}, 'accepted');
	is_false($r->{dlq}, 'not dead-lettered');
	my ($s, $b) = $q->pop('drop', batch => 1);
	is_deeply(txns($b), ['drop-m-1'], 'dropped: the group is past it');
	is(dlq(queue => 'drop')->{total}, 0, 'no dead letter');
};

subtest 'a finished batch resets the budget' => sub {
	is(($q->configure('reset', retryLimit => 1))[0], 200, 'retryLimit 1');
	$q->push_n('reset', 2);
	my ($m, $r) = pop_and_nack('reset', 'failed');
	is_false($r->{dlq}, 'reset-m-0 failed once');
	($m, $r) = pop_and_nack('reset', 'completed');
	is($m->{transactionId}, 'reset-m-0', 'then completed');
	($m, $r) = pop_and_nack('reset', 'failed');
	is($m->{transactionId}, 'reset-m-1', 'reset-m-1 failed once');
	is_false($r->{dlq}, 'its own budget: redelivered, not dead-lettered');
};

subtest 'the dead-letter list' => sub {
	my $d = dlq();
	ok($d->{total} >= 4, "all queues: $d->{total} rows");
	my @t = map { $_->{failedAt} } @{ $d->{messages} };
	is_deeply(\@t, [ sort { $b cmp $a } @t ], 'newest first');
	$d = dlq(limit => 1, offset => 1);
	is(scalar @{ $d->{messages} }, 1, 'limit 1');
	is_deeply($d->{pagination}, { limit => 1, offset => 1 }, 'pagination echoed');
};

done_testing;
