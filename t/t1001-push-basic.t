#!/usr/bin/perl
# Push (SPEC 4): the answer's shape and order, and queues and partitions that come into
# being with the first message pushed to them.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

subtest 'one request, three items, two queues: 201 and one element per item in order' => sub {
	my ($s, $b, $h) = $q->push_items(
		{ queue => 'orders', partition => 'customer-42', payload => { orderId => 9137 },
		  transactionId => 'order-9137-paid', traceId => 'trace-9137' },
		{ queue => 'billing.invoice.v2', payload => { invoice => 1 }, transactionId => 'inv-1' },
		{ queue => 'orders', partition => 'customer-42', data => { orderId => 9138 },
		  transactionId => 'order-9138-paid' },
	);
	is($s, 201, 'status 201');
	like($h->{'content-type'} // '', qr{^application/json}, 'JSON answer');
	is(ref $b, 'ARRAY', 'answer is an array');
	is(scalar @$b, 3, 'one element per item');
	is_deeply([ map { $_->{index} } @$b ], [ 0, 1, 2 ], 'index follows input order');
	is_deeply([ map { $_->{transaction_id} } @$b ],
		[ 'order-9137-paid', 'inv-1', 'order-9138-paid' ], 'transaction_id echoed');
	is_deeply([ map { $_->{queueName} } @$b ], [ 'orders', 'billing.invoice.v2', 'orders' ],
		'queueName echoed');
	is_deeply([ map { $_->{status} } @$b ], [ ('queued') x 3 ], 'every item queued');
	like($_->{message_id}, uuid_re, "message_id $_->{message_id} is a UUIDv7") for @$b;
	my %ids = map { $_->{message_id} => 1 } @$b;
	is(scalar keys %ids, 3, 'three distinct message ids');

	my ($ps, $pop) = $q->pop('orders', partition => 'customer-42');
	is($ps, 200, 'the auto-created partition delivers');
	is_deeply(txns($pop), [ 'order-9137-paid', 'order-9138-paid' ], 'in push order');
	is_deeply(offsets($pop), [ 0, 1 ], 'offsets from 0, dense');
	is_deeply([ map { $_->{id} } @{ $pop->{messages} } ],
		[ $b->[0]{message_id}, $b->[2]{message_id} ], 'popped ids are the pushed message_ids');
	is_deeply($pop->{messages}[0]{data}, { orderId => 9137 }, 'payload comes back as data');
	is_deeply($pop->{messages}[1]{data}, { orderId => 9138 }, '"data" is accepted as payload');
	is($pop->{messages}[0]{traceId}, 'trace-9137', 'traceId stored and returned');
	is_null($pop->{messages}[1], 'traceId', 'traceId null when none was sent');
};

subtest 'no partition named: the partition is Default' => sub {
	my ($s, $pop) = $q->pop('billing.invoice.v2');
	is($s, 200, 'pop');
	is($pop->{partition}, 'Default', 'top-level partition');
	is($pop->{messages}[0]{partition}, 'Default', 'message partition');
	($s, $pop) = $q->pop('orders', partition => 'Default');
	is($s, 204, 'orders/Default got nothing: its items named customer-42');
};

subtest 'queue created by a push: namespace and task from the dotted name, push defaults' => sub {
	my ($s, $d) = $q->get('/api/v1/pop', { namespace => 'billing', task => 'invoice',
		consumerGroup => 'labels', subscriptionMode => 'all' });
	is($s, 200, 'found by namespace=billing&task=invoice');
	is($d->{messages}[0]{queue}, 'billing.invoice.v2', 'namespace before the first dot, task after');
	($s) = $q->get('/api/v1/pop', { namespace => 'billing', task => 'invoice.v2' });
	is($s, 204, 'task stops at the second dot');
	($s, $d) = $q->get('/api/v1/resources/queues/billing.invoice.v2');
	is($s, 200, 'queue detail');
	is($d->{options}{leaseTime}, 60, 'leaseTime 60 for a queue created by a push');
	is($d->{options}{retryLimit}, 3, 'retryLimit default 3');
	is($d->{options}{dedupWindowSeconds}, 3600, 'dedupWindowSeconds default 3600');
};

subtest 'no transactionId: the message id is used' => sub {
	my ($s, $b) = $q->push_items({ queue => 'anon', payload => 'x' });
	is($s, 201, 'status 201');
	is($b->[0]{status}, 'queued', 'queued');
	is($b->[0]{transaction_id}, $b->[0]{message_id}, 'transaction_id = message_id');
	my (undef, $pop) = $q->pop('anon');
	is($pop->{messages}[0]{transactionId}, $b->[0]{message_id}, 'popped transactionId too');
};

subtest 'payload may be any JSON value, absent = null' => sub {
	my @values = ('plain text', 42, 3.5, [ 1, 'two', { three => 3 } ], jtrue, "h\x{e9}llo \x{2713}",
		{ nested => { deep => [ undef ] } });
	my ($s, $b) = $q->push_items((map { +{ queue => 'values', payload => $_ } } @values),
		{ queue => 'values' });
	is($s, 201, 'pushed');
	my (undef, $pop) = $q->pop('values', batch => 50);
	is(scalar @{ $pop->{messages} }, @values + 1, 'all delivered');
	for my $i (0 .. $#values) {
		is_deeply($pop->{messages}[$i]{data}, $values[$i], "value $i round-trips");
	}
	is_null($pop->{messages}[-1], 'data', 'absent payload pops as null');
};

subtest 'empty items: 201 []' => sub {
	my ($s, $b, undef, $raw) = $q->push_items();
	is($s, 201, 'status 201');
	is_deeply($b, [], 'empty array');
};

subtest 'many partitions in one request keep their own offsets' => sub {
	my ($s, $b) = $q->push_items(map { +{ queue => 'wide', partition => "p$_",
		transactionId => "w-$_-a" }, +{ queue => 'wide', partition => "p$_",
		transactionId => "w-$_-b" } } 1 .. 4);
	is($s, 201, 'pushed 8 items to 4 partitions');
	for my $p (1 .. 4) {
		my (undef, $pop) = $q->pop('wide', partition => "p$p");
		is_deeply(txns($pop), [ "w-$p-a", "w-$p-b" ], "p$p holds its two, in order");
		is_deeply(offsets($pop), [ 0, 1 ], "p$p offsets start at 0");
	}
};

done_testing;
