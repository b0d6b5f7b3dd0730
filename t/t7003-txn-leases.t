#!/usr/bin/perl
# Leases in a bundle (SPEC 8): an ack's own leaseId first; else, with a top-level
# requiredLeases (what the reference clients send instead of per-ack ids and groups), the lease
# the (partition, group) holds must be one of them; else lease-less. Every required lease must
# be live. An ack naming no group acks for the group whose lease it goes by.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;
use Time::HiRes qw(time);

start_pg();
my $q = start_queend();

sub committed {
	my ($queue, $group) = @_;
	my (undef, $b) = $q->get("/api/v1/resources/queues/$queue/depth", $group ? { group => $group } : undef);
	return { map { $_->{name} => $_->{committed} } @{ ($b // {})->{partitions} // [] } };
}

sub queue_exists { ($q->get("/api/v1/resources/queues/$_[0]"))[0] == 200 }

# An ack the way the reference clients build it: no leaseId, no consumerGroup.
sub bare_ack {
	my $m = shift;
	return { type => 'ack', transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		status => 'completed' };
}

# A UUIDv7 no pop ever handed out.
my $ghost = '01900000-0000-7000-8000-000000000001';

subtest 'requiredLeases without per-ack lease or group: acks for the leasing group' => sub {
	$q->push_n('jl', 2);
	my (undef, $p) = $q->pop('jl', batch => 2, consumerGroup => 'g1', subscriptionMode => 'all');
	my $r = $q->transaction({ operations => [ map({ bare_ack($_) } @{ $p->{messages} }),
		{ type => 'push', items => [ { queue => 'jl-out', payload => 1 } ] } ],
		requiredLeases => [ $p->{leaseId} ] }, 'client-style bundle');
	is_true($r->{success}, 'commits');
	is_deeply([ map { $_->{consumerGroup} } @{ $r->{results} }[0, 1] ], [qw(g1 g1)],
		'the acks went to the group holding the lease');
	is_deeply(committed('jl', 'g1'), { Default => 1 }, 'group g1 committed both');
	my (undef, $qm) = $q->pop('jl', batch => 10);
	is_deeply(txns($qm), [qw(jl-m-0 jl-m-1)], 'queue mode is untouched: it still gets both');
};

subtest 'a required lease that is not live rolls the bundle back' => sub {
	$q->push_n('nl', 1);
	my (undef, $p) = $q->pop('nl');
	my $r = $q->transaction({ operations => [ bare_ack($p->{messages}[0]),
		{ type => 'push', queue => 'nl-out', payload => 1 } ],
		requiredLeases => [ $p->{leaseId}, $ghost ] }, 'one required lease never existed');
	is_false($r->{success}, 'refused');
	is($r->{reason}, 'ack_rejected', 'ack_rejected');
	is($r->{lease}, $ghost, 'naming the lease');
	ok(!queue_exists('nl-out'), 'nothing pushed');
	is_deeply(committed('nl'), { Default => -1 }, 'nothing acked');

	$r = $q->transaction({ operations => [ { type => 'push', queue => 'nl-out', payload => 1 } ],
		requiredLeases => [ $ghost ] }, 'a required lease and no ack');
	is($r->{reason}, 'ack_rejected', 'still refused: every required lease must be live');
	ok(!queue_exists('nl-out'), 'nothing pushed');

	$r = $q->transaction({ operations => [ { type => 'push', queue => 'nl-out', payload => 1 } ],
		requiredLeases => [ 'not-a-lease' ] }, 'a required lease that is no lease id');
	is($r->{reason}, 'ack_rejected', 'refused');
	ok(!queue_exists('nl-out'), 'nothing pushed');

	$r = $q->transaction({ operations => [ bare_ack($p->{messages}[0]),
		{ type => 'push', queue => 'nl-out', payload => 1 } ],
		requiredLeases => [ $p->{leaseId} ] }, 'the live lease alone');
	is_true($r->{success}, 'commits');
};

subtest 'the lease held on the partition must be one of requiredLeases' => sub {
	$q->push_n('two', 1, partition => 'p1');
	$q->push_n('two', 1, partition => 'p2', prefix => 'two-n');
	my (undef, $p1) = $q->pop('two', partition => 'p1');
	my (undef, $p2) = $q->pop('two', partition => 'p2');
	isnt($p1->{leaseId}, $p2->{leaseId}, 'two pops, two leases');
	my $m2 = $p2->{messages}[0];

	my $r = $q->transaction({ operations => [ bare_ack($m2), { type => 'push', queue => 'two-out' } ],
		requiredLeases => [ $p1->{leaseId} ] }, 'ack of p2 with only p1\'s lease required');
	is_false($r->{success}, 'refused');
	is($r->{reason}, 'ack_rejected', 'ack_rejected');
	is($r->{failedIndex}, 0, 'the ack');
	ok(!queue_exists('two-out'), 'nothing pushed');
	is_deeply(committed('two'), { p1 => -1, p2 => -1 }, 'nothing acked');

	$r = $q->transaction({ operations => [ { %{ bare_ack($m2) }, leaseId => $p2->{leaseId} },
		{ type => 'push', queue => 'two-out' } ],
		requiredLeases => [ $p1->{leaseId} ] }, 'the same ack carrying its own leaseId');
	is_true($r->{success}, 'the ack\'s own lease comes first');
	is_deeply(committed('two'), { p1 => -1, p2 => 0 }, 'p2 acked');

	$r = $q->transaction({ operations => [ { %{ bare_ack($p1->{messages}[0]) }, leaseId => $p2->{leaseId} } ] },
		'an own leaseId that is another partition\'s');
	is($r->{reason}, 'ack_rejected', 'refused: a lease is checked against its partition');
};

subtest 'an own leaseId and no group: the group holding that lease' => sub {
	$q->push_n('og', 1);
	my (undef, $p) = $q->pop('og', consumerGroup => 'g2', subscriptionMode => 'all');
	my $r = $q->transaction({ operations => [ { %{ bare_ack($p->{messages}[0]) }, leaseId => $p->{leaseId} } ] },
		'ack with leaseId, without consumerGroup');
	is_true($r->{success}, 'commits');
	is($r->{results}[0]{consumerGroup}, 'g2', 'for group g2');
	is_deeply(committed('og', 'g2'), { Default => 0 }, 'g2 committed');
};

subtest 'no lease anywhere: a lease-less ack' => sub {
	$q->push_n('ll', 2);
	my (undef, $p) = $q->pop('ll', batch => 1);
	my $r = $q->transaction({ operations => [ bare_ack({ transactionId => 'll-m-1',
		partitionId => $p->{partitionId} }) ] }, 'lease-less ack of the next message');
	is_true($r->{success}, 'commits without a lease check');
	is_deeply(committed('ll'), { Default => 1 }, 'the cursor moved past both');
};

subtest 'a required lease that expired' => sub {
	$q->push_n('ex', 1);
	my (undef, $p) = $q->pop('ex', leaseSeconds => 1);
	my $t0 = time;
	wait_until(sub { time > $t0 + 2.5 }, 10, 0.1);
	my $r = $q->transaction({ operations => [ bare_ack($p->{messages}[0]),
		{ type => 'push', queue => 'ex-out' } ], requiredLeases => [ $p->{leaseId} ] },
		'bundle after the lease expired');
	is($r->{reason}, 'ack_rejected', 'refused');
	ok(!queue_exists('ex-out'), 'nothing pushed');
	is_deeply(committed('ex'), { Default => -1 }, 'nothing acked');
};

subtest 'requiredLeases must hold strings' => sub {
	my ($s, $b) = $q->post_json('/api/v1/transaction',
		{ operations => [ { type => 'push', queue => 'rl-out' } ], requiredLeases => [ 42 ] });
	is($s, 400, 'a number is a bad body');
	like($b->{error} // '', qr/requiredLeases\[0\]/, "naming it: $b->{error}");
	($s, $b) = $q->post_json('/api/v1/transaction',
		{ operations => [ { type => 'push', queue => 'rl-out' } ], requiredLeases => 'x' });
	is($s, 400, 'not an array: a bad body');
	ok(!queue_exists('rl-out'), 'nothing pushed');
};

done_testing;
