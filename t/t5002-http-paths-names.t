#!/usr/bin/perl
# Paths and names (SPEC 22): path parameters are percent-decoded exactly once (%2F is a '/'
# inside a name, %25 a '%'); bytes PostgreSQL would refuse (invalid UTF-8, NUL) are a 400
# naming the parameter, never a 503; names are 1 to 255 bytes of UTF-8 without control
# characters, on every route that takes one; a client's bytes never forge a log line.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use IO::Socket::INET;
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend(LOG_LEVEL => 'info');

subtest 'an encoded slash in a group name no longer deletes group a of queue b' => sub {
	$q->push_items({ queue => 'b', transactionId => 'b-1' });
	my ($s) = $q->pop('b', consumerGroup => 'a', subscriptionMode => 'all');
	is($s, 200, 'group a holds a lease on queue b');
	my $b;
	($s, $b) = $q->del('/api/v1/consumer-groups/a%2Fqueues%2Fb');
	is($s, 200, 'DELETE /api/v1/consumer-groups/a%2Fqueues%2Fb');
	is($b->{consumerGroup}, 'a/queues/b', 'deletes the group named a/queues/b');
	is($b->{queueName}, undef, 'of every queue, not of queue b');
	($s, $b) = $q->get('/api/v1/consumer-groups/a');
	is($s, 200, 'group a');
	ok($b->{b} && $b->{b}{partitionCursors} == 1, 'still has its cursor on queue b')
		or diag(explain $b);
};

subtest 'an encoded percent sign is decoded once' => sub {
	$q->push_items({ queue => 'pct%41', transactionId => 'pct-1' });
	my ($s, $b) = $q->get('/api/v1/pop/queue/pct%2541');
	is($s, 200, 'pop /api/v1/pop/queue/pct%2541 reaches queue pct%41');
	is_deeply(txns($b), ['pct-1'], 'with its message');
	($s, $b) = $q->get('/api/v1/resources/queues/pct%2541');
	is($s, 200, 'and so does its detail');
};

subtest 'invalid UTF-8 in a path or query parameter is a 400, not a 503' => sub {
	for my $c (['/api/v1/pop/queue/%ff%fe', qr/^queue /],
		   ['/api/v1/resources/queues/%ff%fe/depth', qr/^queue /],
		   ['/api/v1/pop/queue/q?consumerGroup=%C0%80', qr/consumerGroup/],
		   ['/api/v1/timers/%ff', qr/^queue /],
		   ['/api/v1/dlq?queue=%ed%a0%80', qr/queue/],
		   ['/api/v1/messages?partition=x%00y', qr/partition/],
		   ['/api/v1/kv/app/%FF%FE', qr/kv_bad_request/]) {
		my ($path, $names) = @$c;
		my ($s, $b) = $q->get($path);
		is($s, 400, "GET $path: 400");
		like($b->{error} // '', $names, 'naming the parameter');
	}
	my ($s, $b) = $q->raw("GET /api/v1/pop/queue/\xff\xfe HTTP/1.1\r\nHost: x\r\n" .
		"Connection: close\r\n\r\n");
	is($s, 400, 'raw bytes in the request line: 400');
	like($b->{error} // '', qr/UTF-8/, 'saying why');
};

subtest 'names are 1 to 255 bytes of UTF-8 without control characters, on every route' => sub {
	my $long = 'q' x 256;
	my ($s, $b) = $q->push_items({ queue => $long });
	is($s, 400, 'push: a 256-byte queue name is a 400 (was a 503 that failed the batch)');
	like($b->{error} // '', qr/queue must be at most 255 bytes/, 'naming the field');
	($s, $b) = $q->push_items({ queue => 'ok', partition => 'p' x 3000 });
	is($s, 400, 'push: a 3000-byte partition name is a 400');
	like($b->{error} // '', qr/partition/, 'naming it');
	($s) = $q->push_items({ queue => 'q' x 255, partition => 'p' x 255, transactionId => 'max' });
	is($s, 201, 'push: 255 bytes each is fine');
	($s, $b) = $q->pop('q' x 255, partition => 'p' x 255);
	is($s, 200, 'and pops back');
	($s, $b) = $q->pop('ok', consumerGroup => 'g' x 5000);
	is($s, 400, 'pop: a 5000-byte consumerGroup is a 400 (a 9000-byte one was a 503)');
	like($b->{error} // '', qr/consumerGroup/, 'naming it');
	($s, $b) = $q->pop('ok', consumerGroup => 'g' x 9000);
	is($s, 414, 'pop: a 9000-byte consumerGroup makes the URL too long: 414');
	($s, $b) = $q->get('/api/v1/pop/queue/a%0Ab');
	is($s, 400, 'pop: a control character in a queue name is a 400');
	($s, $b) = $q->get('/api/v1/pop', { namespace => 'n' x 300 });
	is($s, 400, 'discovery pop: a 300-byte namespace is a 400');
	($s, $b) = $q->post_json('/api/v1/configure', { queue => "bad\x{1}name" });
	is($s, 400, 'configure: a control character in the queue name is a 400');
	like($b->{error} // '', qr/queue/, 'naming it');
	($s, $b) = $q->post_json('/api/v1/configure', { queue => 'cfg', namespace => 'n' x 256 });
	is($s, 400, 'configure: a 256-byte namespace is a 400');
	like($b->{error} // '', qr/namespace/, 'naming it');
	($s, $b) = $q->post_json('/api/v1/ack', { transactionId => 't', partitionId =>
		'00000000-0000-4000-8000-000000000000', status => 'completed',
		consumerGroup => 'g' x 256 });
	is($s, 400, 'ack: a 256-byte consumerGroup is a 400');
	($s, $b) = $q->post_json('/api/v1/timers', { operations => [ { op => 'schedule',
		queue => 'q' x 256, timerKey => 'k', delayMs => 1000, txn => 't', payload => 1 } ] });
	is($s, 400, 'timers: a 256-byte queue name is a 400');
	($s, $b) = $q->post_json('/api/v1/transaction', { operations => [ { type => 'push',
		items => [ { queue => 'q' x 256 } ] } ] });
	is($s, 400, 'transaction: a 256-byte queue name is a 400');
	($s, $b) = $q->get('/api/v1/resources/queues/' . ('q' x 256));
	is($s, 400, 'queue detail: a 256-byte name is a 400');
	($s) = $q->get('/health');
	is($s, 200, 'the broker is fine');
};

subtest 'an encoded newline in a path does not forge an access log line' => sub {
	my ($s) = $q->get('/api/v1/pop/queue/x%0A%3C3%3Eforged');
	is($s, 400, 'the control character is refused');
	$q->raw("GET /api/v1/pop/queue/x\x0b<3>forged2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	($s) = $q->get('/health');
	my $log = do { local (@ARGV, $/) = ($q->{log}); <> };
	unlike($log, qr/^<3>forged/m, 'no log line starts with what the client wrote');
	like($log, qr/GET \/api\/v1\/pop\/queue\/x%0A%3C3%3Eforged -> 400/,
		'the access line shows the path as sent');
};

done_testing();
