#!/usr/bin/perl
# A pipeline stage built on transactions (SPEC 8, 19): it pops from its input and sends its
# output and the ack of its input as one bundle, the output's transactionId derived from the
# input's. A stage that crashes between the pop and the commit sees its input again once the
# lease expires and never produces its output twice: the replayed bundle is refused as a
# duplicate, and the crashed stage's own bundle, arriving late, as an ack of a dead lease.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

my %pop = (batch => 1, consumerGroup => 'stage', subscriptionMode => 'all');

# The stage's bundle for one input message: its output (transactionId out-<input>) and the ack.
sub bundle {
	my $m = shift;
	return { operations => [
		{ type => 'push', queue => 'stage-out', transactionId => "out-$m->{transactionId}",
		  payload => { doubled => $m->{data}{i} * 2 } },
		{ type => 'ack', transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		  leaseId => $m->{leaseId}, consumerGroup => 'stage', status => 'completed' },
	] };
}

$q->push_n('stage-in', 3, prefix => 'in');

# Message in-0: popped with a short lease, then the stage "crashes" (sends nothing).
my (undef, $first) = $q->pop('stage-in', %pop, leaseSeconds => 1);
my $crashed = $first->{messages}[0];
is($crashed->{transactionId}, 'in-0', 'the stage took in-0, then crashed');

# After the lease expires the input redelivers to the restarted stage.
my $again;
wait_until(sub {
	my ($s, $b) = $q->pop('stage-in', %pop, leaseSeconds => 60);
	$again = $b if $s == 200;
	return $s == 200;
}, 30, 0.25);
is($again->{messages}[0]{transactionId}, 'in-0', 'in-0 is delivered again after the lease expired');
is($again->{messages}[0]{deliveryAttempt}, 2, 'as attempt 2');
isnt($again->{leaseId}, $crashed->{leaseId}, 'under a new lease');

# The crashed stage was not dead after all: its bundle arrives while the new holder works.
my $r = $q->transaction(bundle($crashed), 'the crashed stage\'s bundle arriving late');
is_false($r->{success}, 'refused');
is($r->{reason}, 'ack_rejected', 'its lease is dead');
my ($s, $peek) = $q->get('/api/v1/resources/queues/stage-out');
is($s, 404, 'and its output is not stored');

my $b = bundle($again->{messages}[0]);
$r = $q->transaction($b, 'the restarted stage commits');
is_true($r->{success}, 'output and ack committed');
my $out_id = $r->{results}[0]{messageId};

$r = $q->transaction($b, 'the same bundle replayed (a client retry)');
is_false($r->{success}, 'refused');
is($r->{reason}, 'duplicate', 'as a duplicate');
is($r->{messageId}, $out_id, 'naming the output already stored');

$r = $q->transaction(bundle($crashed), 'the crashed stage\'s bundle, once more after the commit');
is_false($r->{success}, 'refused (its output is a duplicate)');

# The stage carries on with the rest of its input.
for my $n (1, 2) {
	my (undef, $p) = $q->pop('stage-in', %pop);
	is_deeply(txns($p), ["in-$n"], "next input in-$n");
	is_true($q->transaction(bundle($p->{messages}[0]), "in-$n")->{success}, "in-$n processed");
}
($s) = $q->pop('stage-in', %pop);
is($s, 204, 'the input is drained');

my (undef, $out) = $q->pop('stage-out', batch => 100);
is_deeply(txns($out), [qw(out-in-0 out-in-1 out-in-2)], 'each output exactly once, in order');
is_deeply([ map { $_->{data}{doubled} } @{ $out->{messages} } ], [ 0, 2, 4 ], 'with its payload');
is($out->{messages}[0]{id}, $out_id, 'the output of in-0 is the one the first commit stored');

done_testing;
