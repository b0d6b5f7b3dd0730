#!/usr/bin/perl
# Acks inside a lease span made of many small segments (one message per push): acked one at a
# time in order, out of order, several out of order in one call, and from a transaction. The
# ack reads the head of the span first and the whole span only when a message is not there
# (schema/functions/ack.sql); each way must find the message and apply the commit rule.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();
my $G = 'span';

for my $i (0 .. 39) {
	my ($s, $b) = $q->push_items({ queue => 'sp', transactionId => "sp-$i", payload => { i => $i } });
	die "push $i: $s\n" unless $s == 201 && $b->[0]{status} eq 'queued';
}

sub pop_n {
	my ($n) = @_;
	my ($s, $b) = $q->pop('sp', batch => $n, wait => 'false', consumerGroup => $G,
		subscriptionMode => 'all');
	is($s, 200, "popped $n");
	return $b->{messages} // [];
}

sub ack {
	my ($m, %o) = @_;
	my ($s, $b) = $q->post_json('/api/v1/ack', { transactionId => $m->{transactionId},
		partitionId => $m->{partitionId}, leaseId => $m->{leaseId},
		status => 'completed', consumerGroup => $G });
	is($s, 200, "ack $m->{transactionId}: 200");
	return ref $b eq 'ARRAY' ? $b->[0] : {};
}

subtest 'in order, one per call: each found, the last releases the lease' => sub {
	my $ms = pop_n(10);
	is_deeply(txns({ messages => $ms }), [ map { "sp-$_" } 0 .. 9 ], 'the first ten');
	for my $k (0 .. 9) {
		my $r = ack($ms->[$k]);
		is_true($r->{success}, "sp-$k acked");
		is_false($r->{noop}, "sp-$k not a noop");
		($k == 9 ? \&is_true : \&is_false)->($r->{leaseReleased},
			"sp-$k " . ($k == 9 ? 'releases' : 'keeps') . ' the lease');
	}
};

subtest 'out of order: a later message first, then an earlier one is a noop' => sub {
	my $ms = pop_n(5);
	is($ms->[0]{transactionId}, 'sp-10', 'the next batch starts after the committed ten');
	my $r = ack($ms->[2]);
	is_true($r->{success}, 'sp-12 acked before sp-10 and sp-11');
	is_false($r->{noop}, 'not a noop');
	is_false($r->{leaseReleased}, 'the span goes on to sp-14');
	$r = ack($ms->[0]);
	is_true($r->{success}, 'sp-10 acked after');
	is_true($r->{noop}, 'a noop: the cursor is past it');
	$r = ack($ms->[4]);
	is_true($r->{success}, 'sp-14 acked');
	is_true($r->{leaseReleased}, 'the end of the span releases the lease');
	my $m = pop_n(1)->[0];
	is($m->{transactionId}, 'sp-15', 'nothing below sp-15 comes back');
	is_true(ack($m)->{leaseReleased}, 'sp-15 acked');
};

subtest 'several out of order in one batch call' => sub {
	my $ms = pop_n(5);
	is($ms->[0]{transactionId}, 'sp-16', 'the next batch');
	my ($s, $b) = $q->ack_batch($G, map { +{ transactionId => $_->{transactionId},
		partitionId => $_->{partitionId}, leaseId => $_->{leaseId},
		status => 'completed' } } @$ms[3, 1]);
	is($s, 200, 'ack/batch 200');
	$b = [] unless ref $b eq 'ARRAY';
	is_true($b->[0]{success}, 'sp-19 acked');
	is_true($b->[1]{success}, 'sp-17 acked in the same call');
	is_false($b->[0]{leaseReleased}, 'sp-20 is still leased');
	is_true(ack($ms->[4])->{leaseReleased}, 'sp-20 ends the span');
	is(pop_n(1)->[0]{transactionId}, 'sp-21', 'the cursor is past sp-20');
};

subtest 'one batch call over two partitions: a run the keyed update takes and one it does not' => sub {
	for my $part (qw(a b)) {
		my ($s) = $q->push_items(map { +{ queue => 'sp2', partition => $part,
			transactionId => "$part-$_" } } 0 .. 2);
		is($s, 201, "three messages in $part");
	}
	my ($s, $b) = $q->pop('sp2', partitions => 2, batch => 10, wait => 'false',
		consumerGroup => $G, subscriptionMode => 'all');
	is($b->{partitionsClaimed}, 2, 'one lease over a and b');
	my %m = map { $_->{transactionId} => $_ } @{ $b->{messages} };
	my $ack = sub { +{ transactionId => $_[0]{transactionId}, partitionId => $_[0]{partitionId},
		leaseId => $_[0]{leaseId}, status => 'completed' } };
	is_true(ack($m{'a-1'})->{success}, 'a-1 acked: a is committed past a-0');
	my $r;
	($s, $r) = $q->ack_batch($G, map { $ack->($m{$_}) } qw(a-0 b-0 b-1));
	is($s, 200, 'ack/batch 200');
	$r = [] unless ref $r eq 'ARRAY';
	is_true($r->[0]{success}, 'a-0, below the committed offset, is accepted');
	is_true($r->[0]{noop}, 'as a noop');
	for my $k (1, 2) {
		is_true($r->[$k]{success}, "$r->[$k]{transactionId} acked");
		is_false($r->[$k]{noop}, "$r->[$k]{transactionId} moved the cursor");
	}
	is_false($r->[2]{leaseReleased}, 'b-2 is still leased');
	($s, $r) = $q->ack_batch($G, map { $ack->($m{$_}) } qw(a-2 b-2));
	is_true($_->{leaseReleased}, "$_->{transactionId} ends its span") for @$r;
	($s) = $q->pop('sp2', partitions => 2, wait => 'false', consumerGroup => $G,
		subscriptionMode => 'all');
	is($s, 204, 'both partitions are read to the end');
};

subtest 'from a transaction: the second message of a span, with a push' => sub {
	# The group above holds a lease on sp-21; a fresh group reads the queue from its start.
	my ($s, $b) = $q->pop('sp', batch => 4, wait => 'false', consumerGroup => 'span-txn',
		subscriptionMode => 'all');
	my $ms = $b->{messages} // [];
	is($ms->[1]{transactionId}, 'sp-1', 'a new group starts at the log start');
	my $r = $q->transaction({ operations => [
		{ type => 'ack', transactionId => 'sp-1', partitionId => $ms->[1]{partitionId},
		  leaseId => $ms->[1]{leaseId}, status => 'completed', consumerGroup => 'span-txn' },
		{ type => 'push', items => [ { queue => 'sp-out', payload => { from => 'sp-1' } } ] },
	] }, 'ack of sp-1 and a push');
	is_true($r->{success}, 'committed');
	($s, $b) = $q->pop('sp', batch => 4, wait => 'false', consumerGroup => 'span-txn');
	is($s, 204, 'sp-2 and sp-3 are still leased to the first pop');
	($s, $b) = $q->pop('sp-out', batch => 1, wait => 'false');
	is($s, 200, 'the output was pushed');
};

done_testing();
