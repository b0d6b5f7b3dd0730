#!/usr/bin/perl
# Limits of SPEC 22 on bodies: items in one push (413 "too many items"), a chunked body past
# QUEEN_MAX_BODY_BYTES (413, was a connection reset), all bodies held together past
# QUEEN_MAX_INFLIGHT_BYTES (429 + Retry-After), a raw NUL after a literal on the routes jansson
# parses (was applied with 200), a number out of range as 1e300 (was undefined behaviour),
# the first bad configure option named as a string (SPEC 21). Large bodies are parsed by a
# worker: they answer the same.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep);
use QueenTest;

start_pg();
my $q = start_queend(QUEEN_MAX_PUSH_ITEMS => 100, QUEEN_MAX_BODY_BYTES => 1048576,
	QUEEN_MAX_INFLIGHT_BYTES => 1572864, QUEEN_GROUP_COMMIT_ITEMS => 10);

sub items { my ($n, $pad) = @_; map { { queue => 'lim', transactionId => "i$_",
	payload => { pad => $pad // '' } } } 1 .. $n }

subtest 'a push of more than QUEEN_MAX_PUSH_ITEMS items is a 413 and stores nothing' => sub {
	my ($s, $b) = $q->push_items(items(101));
	is($s, 413, '101 items are answered 413');
	is($b->{error}, 'too many items', 'too many items');
	is($b->{limit}, 100, 'with the limit');
	($s) = $q->pop('lim');
	is($s, 204, 'nothing stored');
	($s, $b) = $q->push_items(items(100));
	is($s, 201, '100 items: 201');
	$q->ack_all(($q->pop('lim', batch => 100))[1]);
};

subtest 'the same item limit bounds a transaction and a batch ack' => sub {
	my ($s, $b) = $q->post_json('/api/v1/transaction',
		{ operations => [ { type => 'push', items => [ items(101) ] } ] });
	is($s, 413, 'a transaction of 101 push items is answered 413');
	is($b->{error}, 'too many items', 'too many items');
	($s, $b) = $q->post_json('/api/v1/ack/batch', { acknowledgments => [ map {
		{ transactionId => "t$_", partitionId => '00000000-0000-4000-8000-000000000000' } }
		1 .. 101 ] });
	is($s, 413, 'a batch of 101 acks is answered 413');
	is($b->{limit}, 100, 'with the limit');
};

subtest 'a chunked body over QUEEN_MAX_BODY_BYTES is a 413, not a connection reset' => sub {
	my $chunk = 'x' x 65536;
	my $body = join '', map { sprintf("%x\r\n%s\r\n", length $chunk, $chunk) } 1 .. 20;
	my ($s, $b) = $q->raw("POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: " .
		"application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" .
		$body . "0\r\n\r\n", 20);
	is($s, 413, 'answered 413');
	is($b->{error}, 'payload too large', 'payload too large');
	is($b->{limit}, 1048576, 'with the limit');
};

subtest 'bodies past QUEEN_MAX_INFLIGHT_BYTES get 429 with Retry-After' => sub {
	my $json = QueenTest::to_json({ items => [ items(50, 'y' x 19000) ] });
	my $half = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->port,
		Proto => 'tcp') or die "connect: $!";
	syswrite($half, "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: " .
		"application/json\r\nContent-Length: " . length($json) . "\r\n\r\n" .
		substr($json, 0, 900000));
	sleep 0.5;
	my ($s, $b, $h) = $q->request('POST', '/api/v1/push', $json);
	is($s, 429, 'a second body that would pass the limit: 429');
	like($h->{'retry-after'} // '', qr/^\d+$/, 'with Retry-After');
	like($b->{error} // '', qr/in flight/, 'saying why');
	syswrite($half, substr($json, 900000));
	my $answer = '';
	while (sysread($half, $answer, 65536, length $answer)) {
		last if $answer =~ /\r\n\r\n.*\]\s*$/s;
	}
	like($answer, qr{^HTTP/1\.1 201}, 'the first one completes (a worker parsed its 960 KB)');
	close $half;
	($s) = $q->request('POST', '/api/v1/push', $json =~ s/"i(\d+)"/"j$1"/gr);
	is($s, 201, 'once it is answered, the next one is taken');
	($s, $b) = $q->request('POST', '/api/v1/push', ('{"items":[' . ('1,' x 300000)) . '1]}');
	is($s, 400, 'a large body that is not valid items: 400 from the worker that parsed it');
};

subtest 'a raw NUL after a literal is refused on the routes jansson parses' => sub {
	my ($s, $b) = $q->request('POST', '/api/v1/configure',
		qq({"queue":"c1","options":{"retentionEnabled":false\0,"leaseTime":31}}));
	is($s, 400, 'configure: 400 (was applied with 200)');
	like($b->{error} // '', qr/NUL/, 'naming the NUL');
	($s) = $q->get('/api/v1/resources/queues/c1');
	is($s, 404, 'the queue was not created');
	($s) = $q->request('POST', '/api/v1/ack', qq({"transactionId":"t"\0,"partitionId":"x"}));
	is($s, 400, 'ack: 400');
	($s) = $q->request('POST', '/api/v1/transaction', qq({"operations":[]\0}));
	is($s, 400, 'transaction: 400');
	($s) = $q->request('POST', '/api/v1/configure', qq({"queue":"c1"}\0));
	is($s, 400, 'a NUL after the whole value: 400');
};

subtest 'numbers out of range are refused before any conversion; invalid is a string' => sub {
	for my $v ('1e300', '-1e300', '1e19', '9007199254740993.0', '30.5') {
		my ($s, $b) = $q->request('POST', '/api/v1/configure',
			qq({"queue":"c2","options":{"leaseTime":$v}}));
		is($s, 400, "leaseTime $v: 400");
		is($b->{invalid}, 'leaseTime', 'invalid names the option as a string (SPEC 21)');
	}
	my ($s, $b) = $q->request('POST', '/api/v1/configure',
		qq({"queue":"c2","options":{"maxSize":1e300,"retryLimit":-1}}));
	is($b->{invalid}, 'retryLimit', 'the first offending option in table order');
	($s, $b) = $q->request('POST', '/api/v1/configure',
		qq({"queue":"c2","options":{"leaseTime":30.0}}));
	is($s, 200, 'a whole number sent as 30.0 is accepted') or diag(explain($b));
	is($b->{options}{leaseTime}, 30, 'as 30');
};

done_testing();
