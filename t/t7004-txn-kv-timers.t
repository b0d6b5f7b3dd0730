#!/usr/bin/perl
# The riders of a bundle (SPEC 8, 13, 14, 21): "kv" ops and "timers" commit with the pushes and
# acks or not at all. A required KV precondition that fails rolls everything back and answers
# the KV failure fields; timers scheduled in a committed bundle fire, those of a rolled-back
# bundle do not exist. Results: operations first, then kv, then timers.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub committed {
	my ($queue) = @_;
	my (undef, $b) = $q->get("/api/v1/resources/queues/$queue/depth");
	return { map { $_->{name} => $_->{committed} } @{ ($b // {})->{partitions} // [] } };
}

sub queue_exists { ($q->get("/api/v1/resources/queues/$_[0]"))[0] == 200 }

sub kv_get { my (undef, $b) = $q->get("/api/v1/kv/$_[0]/$_[1]"); return $b // {} }

sub ack_op {
	my $m = shift;
	return { type => 'ack', transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed' };
}

subtest 'an idempotency marker in kv commits with the output and the ack' => sub {
	$q->push_n('orders', 2);
	my (undef, $p) = $q->pop('orders', batch => 1);
	my $m = $p->{messages}[0];
	my $r = $q->transaction({ operations => [ ack_op($m),
			{ type => 'push', queue => 'invoices', transactionId => 'inv-0', payload => { n => 0 } } ],
		kv => [ { op => 'putIfAbsent', ns => 'orders', key => 'idem:0', value => jtrue,
			  ttlSeconds => 86400, required => jtrue },
			{ op => 'incr', ns => 'orders', key => 'count', delta => 1, forever => jtrue } ] },
		'bundle with kv');
	is_true($r->{success}, 'commits');
	my @res = @{ $r->{results} // [] };
	is_deeply([ map { $_->{type} } @res ], [qw(ack push kv kv)], 'operations first, then kv');
	is_deeply([ map { $_->{index} } @res ], [ 0 .. 3 ], 'index runs on through the kv results');
	is_deeply([ map { $_->{kvIndex} } @res[2, 3] ], [ 0, 1 ], 'kvIndex: the position in kv');
	is_deeply([ map { $_->{op} } @res[2, 3] ], [qw(putIfAbsent incr)], 'kv results as /kv gives them');
	is_true($res[2]{applied}, 'the marker is written');
	is($res[3]{value}, 1, 'the counter is 1');
	ok($res[2]{version} > 0, 'with a version');
	is_true(kv_get('orders', 'idem:0')->{found}, 'the marker reads back');
	is_deeply(committed('orders'), { Default => 0 }, 'input acked');
};

subtest 'a required precondition that fails undoes pushes, acks and earlier kv writes' => sub {
	my (undef, $p) = $q->pop('orders', batch => 1);
	my $m = $p->{messages}[0];
	my $before = kv_get('orders', 'idem:0');
	my $r = $q->transaction({ operations => [ ack_op($m),
			{ type => 'push', queue => 'invoices', transactionId => 'inv-1', payload => { n => 1 } },
			{ type => 'push', queue => 'receipts', payload => 1 } ],
		kv => [ { op => 'incr', ns => 'orders', key => 'count', delta => 1, forever => jtrue },
			{ op => 'put', ns => 'orders', key => 'other', value => 'x', forever => jtrue },
			{ op => 'putIfAbsent', ns => 'orders', key => 'idem:0', value => jtrue,
			  ttlSeconds => 86400, required => jtrue } ] },
		'bundle whose marker exists');
	is_false($r->{success}, 'refused');
	is($r->{reason}, 'kv_precondition', 'reason kv_precondition');
	is($r->{failedIndex}, 2, 'failedIndex: the op in kv');
	is($r->{kvReason}, 'exists', 'kvReason');
	is($r->{version}, $before->{version}, 'version: the current one');
	is_deeply($r->{value}, JSON::PP::true, 'value: the current one');
	is_deeply($r->{results}, [], 'results empty');
	like($r->{error} // '', qr/idem:0/, "error: $r->{error}");

	is_deeply(committed('orders'), { Default => 0 }, 'the ack is undone');
	ok(!queue_exists('receipts'), 'the push to a new queue is undone');
	my (undef, $inv) = $q->pop('invoices', batch => 10);
	is_deeply(txns($inv), ['inv-0'], 'invoices holds only the earlier bundle\'s output');
	is(kv_get('orders', 'count')->{value}, 1, 'the counter did not move');
	is_false(kv_get('orders', 'other')->{found}, 'the earlier put is undone');
};

subtest 'a precondition that is not required only reports itself' => sub {
	my $r = $q->transaction({ operations => [ { type => 'push', queue => 'loose', payload => 1 } ],
		kv => [ { op => 'put', ns => 'orders', key => 'count', value => 9, expect => 999999,
			  forever => jtrue } ] }, 'put with a wrong expect');
	is_true($r->{success}, 'commits');
	is_false($r->{results}[1]{applied}, 'the put is not applied');
	is($r->{results}[1]{reason}, 'version', 'reason version');
	ok(queue_exists('loose'), 'the push is stored');
};

subtest 'timers scheduled in a committed bundle fire' => sub {
	my $r = $q->transaction({ operations => [ { type => 'push', queue => 'saga', transactionId => 'step-1' } ],
		kv => [ { op => 'get', ns => 'orders', key => 'count' } ],
		timers => [ { op => 'schedule', queue => 'compensations', timerKey => 'saga:1', delayMs => 300,
			      txn => 'c-1', payload => { orderId => 1 } } ] }, 'bundle with a timer');
	is_true($r->{success}, 'commits');
	my @res = @{ $r->{results} // [] };
	is_deeply([ map { $_->{type} } @res ], [qw(push kv timer)], 'then the timer results');
	is_deeply([ map { $_->{index} } @res ], [ 0 .. 2 ], 'index runs on');
	is($res[2]{timerIndex}, 0, 'timerIndex');
	is($res[2]{status}, 'scheduled', 'scheduled');
	like($res[2]{messageId} // '', uuid_re, 'with the id the message will carry');

	my ($s, $b) = $q->pop('compensations', wait => 'true', timeout => 20000);
	is($s, 200, 'the timer fires into its queue');
	is_deeply(txns($b), ['c-1'], 'with its txn');
	is_deeply($b->{messages}[0]{data}, { orderId => 1 }, 'and its payload');
	is($b->{messages}[0]{id}, $res[2]{messageId}, 'and the promised id');
};

subtest 'timers of a rolled-back bundle do not exist' => sub {
	my $r = $q->transaction({ operations => [ { type => 'push', queue => 'saga', transactionId => 'step-1' } ],
		timers => [ { op => 'schedule', queue => 'compensations', timerKey => 'saga:2',
			      delayMs => 60000, txn => 'c-2', payload => 2 },
			    { op => 'cancel', queue => 'compensations', timerKey => 'saga:0' } ] },
		'bundle with a duplicate push and a timer');
	is($r->{reason}, 'duplicate', 'refused as a duplicate');
	my ($s) = $q->get('/api/v1/timers/compensations/saga:2');
	is($s, 404, 'the timer was not scheduled');
};

subtest 'kv and timers are validated like their own routes' => sub {
	my ($s, $b) = $q->post_json('/api/v1/transaction', { operations => [ { type => 'push', queue => 'v1' } ],
		kv => [ { op => 'getPrefix', ns => 'orders', prefix => 'idem' } ] });
	is($s, 400, 'getPrefix is not allowed in a transaction');
	is($b->{error}, 'kv_bad_request', 'KV error code');
	($s, $b) = $q->post_json('/api/v1/transaction', { operations => [ { type => 'push', queue => 'v1' } ],
		kv => [ { op => 'put', ns => 'orders', key => 'k', value => 1 } ] });
	is($s, 400, 'a write without ttlSeconds or forever');
	($s, $b) = $q->post_json('/api/v1/transaction', { operations => [ { type => 'push', queue => 'v1' } ],
		timers => [ { op => 'schedule', queue => 'q', timerKey => 'k', delayMs => 91 * 86400 * 1000,
			      payload => 1 } ] });
	is($s, 403, 'a timer beyond the horizon, as /timers answers');
	($s, $b) = $q->post_json('/api/v1/transaction', { operations => [ { type => 'push', queue => 'v1' } ],
		timers => [ { op => 'snooze', queue => 'q', timerKey => 'k' } ] });
	is($s, 400, 'an unknown timer op');
	ok(!queue_exists('v1'), 'none of them pushed anything');
};

subtest 'a bundle of riders only' => sub {
	my $r = $q->transaction({ kv => [ { op => 'put', ns => 'riders', key => 'only', value => 1, forever => jtrue } ] },
		'kv without operations');
	is_true($r->{success}, 'commits');
	is($r->{results}[0]{index}, 0, 'the kv result is the first');
	is_true(kv_get('riders', 'only')->{found}, 'written');
};

done_testing;
