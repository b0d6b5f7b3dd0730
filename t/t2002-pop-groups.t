#!/usr/bin/perl
# Consumer groups on pop (SPEC 5): fan-out, where a new group starts (new, all,
# subscriptionFrom), and the namespace/task discovery route.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

subtest 'two groups each get every message' => sub {
	$q->push_n('fan', 3);
	my ($s1, $g1) = $q->pop('fan', consumerGroup => 'g1', subscriptionMode => 'all');
	my ($s2, $g2) = $q->pop('fan', consumerGroup => 'g2', subscriptionMode => 'all');
	is($s1, 200, 'g1 pops');
	is($s2, 200, 'g2 pops, although g1 holds a lease');
	is_deeply(txns($g1), [qw(fan-m-0 fan-m-1 fan-m-2)], 'g1 got all three');
	is_deeply(txns($g2), txns($g1), 'g2 got the same three');
	is_deeply([ map { $_->{id} } @{ $g2->{messages} } ], [ map { $_->{id} } @{ $g1->{messages} } ],
		'same message ids');
	isnt($g1->{leaseId}, $g2->{leaseId}, 'each under its own lease');
	$q->ack_all($g1);
	my ($s) = $q->pop('fan', consumerGroup => 'g1');
	is($s, 204, 'g1 acked: nothing left for g1');
	($s) = $q->pop('fan', consumerGroup => 'g2');
	is($s, 204, 'g2 still holds its batch: 204');
	($s, my $qm) = $q->pop('fan');
	is_deeply(txns($qm), [qw(fan-m-0 fan-m-1 fan-m-2)], '__QUEUE_MODE__ is one more group');
};

subtest 'subscriptionMode new (the default): skip the backlog, then everything new' => sub {
	$q->push_n('news', 3, prefix => 'old');
	my ($s) = $q->pop('news', consumerGroup => 'fresh');
	is($s, 204, 'a new group sees none of the backlog');
	($s) = $q->pop('news', consumerGroup => 'fresh-only', subscriptionMode => 'new-only');
	is($s, 204, 'new-only is new');
	$q->push_n('news', 2, prefix => 'new');
	my $b;
	($s, $b) = $q->pop('news', consumerGroup => 'fresh');
	is($s, 200, 'pushed after first contact: delivered');
	is_deeply(txns($b), [qw(new-0 new-1)], 'exactly the new messages');
	is_deeply(offsets($b), [ 3, 4 ], 'at their offsets');
	$q->ack_all($b);
	$q->push_n('news', 1, partition => 'later', prefix => 'later');
	($s, $b) = $q->pop('news', consumerGroup => 'fresh');
	is_deeply(txns($b), ['later-0'], 'a partition created later is read from its start');
	$q->ack_all($b);
	($s) = $q->pop('news', consumerGroup => 'fresh', subscriptionMode => 'all');
	is($s, 204, 'a later pop passing another mode changes nothing');
};

subtest 'subscriptionMode all: a new group starts with everything retained' => sub {
	my ($s, $b) = $q->pop('news', partition => 'Default', consumerGroup => 'everything',
		subscriptionMode => 'all', batch => 10);
	is($s, 200, 'status 200');
	is_deeply(txns($b), [qw(old-0 old-1 old-2 new-0 new-1)], 'the backlog of Default');
};

subtest 'subscriptionFrom: a new group starts at the first segment at or after that time' => sub {
	$q->push_n('from', 2, prefix => 'before');
	sleep 0.3;
	my $t = iso_ms(time);
	sleep 0.3;
	$q->push_n('from', 2, prefix => 'after');
	my ($s, $b) = $q->pop('from', consumerGroup => 'since', subscriptionFrom => $t);
	is($s, 200, "subscriptionFrom=$t");
	is_deeply(txns($b), [qw(after-0 after-1)], 'only what was pushed after that time');
	($s) = $q->pop('from', consumerGroup => 'from-now', subscriptionFrom => 'now');
	is($s, 204, 'subscriptionFrom=now: nothing of the past');
	$q->push_n('from', 1, prefix => 'later');
	($s, $b) = $q->pop('from', consumerGroup => 'from-now');
	is_deeply(txns($b), ['later-0'], 'then what comes');
};

subtest 'discovery route: by namespace and/or task, across queues' => sub {
	$q->push_items({ queue => 'billing.invoice.v2', transactionId => 'bi' },
		{ queue => 'billing.refund.v1', transactionId => 'br' },
		{ queue => 'ops.invoice.x', transactionId => 'oi' });
	my ($s, $b) = $q->get('/api/v1/pop', { namespace => 'billing', task => 'invoice' });
	is($s, 200, 'namespace=billing&task=invoice');
	is($b->{queue}, '', 'top-level queue is "" on the discovery route');
	is_deeply(txns($b), ['bi'], 'only billing.invoice.v2 matches both');
	is($b->{messages}[0]{queue}, 'billing.invoice.v2', 'the message names its queue');

	($s, $b) = $q->get('/api/v1/pop', { task => 'invoice', partitions => 10,
		consumerGroup => 'by-task', subscriptionMode => 'all' });
	is($s, 200, 'task=invoice&partitions=10');
	is_deeply([ sort @{ txns($b) } ], [qw(bi oi)], 'both invoice queues, not the refund one');

	($s, $b) = $q->get('/api/v1/pop', { namespace => 'billing', partitions => 10,
		consumerGroup => 'by-ns', subscriptionMode => 'all' });
	is_deeply([ sort @{ txns($b) } ], [qw(bi br)], 'namespace=billing: both billing queues');

	($s) = $q->get('/api/v1/pop', { namespace => 'nothing-here' });
	is($s, 204, 'no matching queue: 204');

	($s, $b) = $q->get('/api/v1/pop');
	is($s, 400, 'neither namespace nor task: 400');
	is_deeply($b, { success => jfalse, error => 'namespace or task is required', messages => [] },
		'the documented body');
	($s, $b) = $q->get('/api/v1/pop', { namespace => '', task => '' });
	is($s, 400, 'both empty: 400');
};

done_testing;
