#!/usr/bin/perl
# HTTP-level errors (SPEC 2, 20): unknown routes, wrong methods, malformed bodies and bodies
# over the limit get the documented answer -- and a rejected request changes nothing. A head
# whose body length is open to two readings is refused and its connection closed; an HTTP/1.1
# head names exactly one host.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use IO::Socket::INET;
use QueenTest;

start_pg();
my $q = start_queend();

subtest 'unknown route: 404 {"error":"not found"}' => sub {
	for my $r ([ GET => '/api/v1/nope' ], [ GET => '/nope' ], [ POST => '/api/v1/push/extra' ],
		[ GET => '/api/v1/streams/x' ], [ GET => '/api/v2/push' ], [ DELETE => '/' ])
	{
		my ($s, $b, $h) = $q->request(@$r);
		is($s, 404, "$r->[0] $r->[1]: 404");
		is_deeply($b, { error => 'not found' }, 'body {"error":"not found"}');
		like($h->{'content-type'} // '', qr{^application/json}, 'as JSON');
	}
};

subtest 'known path, wrong method: 405 with Allow' => sub {
	for my $r ([ GET => '/api/v1/push', 'POST' ], [ DELETE => '/api/v1/pop/queue/x', 'GET' ],
		[ POST => '/health', 'GET' ], [ PUT => '/api/v1/resources/queues/x', 'GET' ],
		[ GET => '/api/v1/ack', 'POST' ], [ GET => '/api/v1/configure', 'POST' ],
		[ GET => '/api/v1/lease/abc/extend', 'POST' ])
	{
		my ($method, $path, $allowed) = @$r;
		my ($s, $b, $h) = $q->request($method, $path, $method eq 'GET' ? undef : '{}');
		is($s, 405, "$method $path: 405");
		like($h->{allow} // '', qr/\b$allowed\b/, "Allow lists $allowed (" . ($h->{allow} // '') . ')');
		ok(ref $b eq 'HASH' && $b->{error}, 'with an error body');
	}
	my (undef, undef, $h) = $q->request('PUT', '/api/v1/resources/queues/x', '{}');
	like($h->{allow} // '', qr/\bDELETE\b/, 'queue detail allows DELETE too');
};

subtest 'malformed JSON or wrong types: 400 "bad body: ..."' => sub {
	for my $r ([ '/api/v1/push', '{"items":[' ], [ '/api/v1/push', 'items=1' ],
		[ '/api/v1/ack', 'not json' ], [ '/api/v1/ack', '["transactionId"]' ],
		[ '/api/v1/ack/batch', '{"acknowledgments":"x"}' ], [ '/api/v1/ack/batch', '{"acknowledgments":[' ],
		[ '/api/v1/configure', '{"queue":' ], [ '/api/v1/configure', '' ],
		[ '/api/v1/lease/abc/extend', '{"seconds":"soon"}' ], [ '/api/v1/lease/abc/extend', '{' ])
	{
		my ($path, $body) = @$r;
		my ($s, $b) = $q->request('POST', $path, $body);
		is($s, 400, "POST $path '$body': 400");
		like(ref $b eq 'HASH' ? $b->{error} // '' : '', qr/^bad body: \S/,
			'error "bad body: <what>": ' . (ref $b eq 'HASH' ? $b->{error} // '' : ''));
	}
	my ($s, $b) = $q->request('POST', '/api/v1/push', "{\"items\":[{\"queue\":\"q\xff\xfe\"}]}");
	is($s, 400, 'invalid UTF-8: 400');
};

subtest 'none of that changed anything' => sub {
	my $list = queue_list($q);
	ok($list, 'GET /api/v1/resources/queues answers the list');
	my @names = map { $_->{name} // $_->{queue} } @{ $list // [] };
	is_deeply(\@names, [], 'no queue was created');
	my ($s) = $q->get('/api/v1/resources/queues/q');
	is($s, 404, 'not even by the requests that named one');
};

# Everything the broker sends on one connection for these bytes, until it closes it (or 5 s).
sub all_answers {
	my ($bytes) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->{port},
		Proto => 'tcp') or die "connect: $!";
	local $SIG{PIPE} = 'IGNORE';
	syswrite($s, $bytes);
	my ($buf, $t0) = ('', time);
	while (time - $t0 < 5) {
		my $rin = '';
		vec($rin, fileno($s), 1) = 1;
		next unless select(my $rout = $rin, undef, undef, 0.1) > 0;
		last unless sysread($s, $buf, 65536, length $buf);
	}
	return ($buf, time - $t0);
}

subtest 'a body whose end is open to two readings: 400, and the connection closes' => sub {
	# A proxy that reads the other Content-Length (or the chunks) would take the rest of the
	# body for a request of its own: the broker must not answer it.
	my $hidden = "GET /api/v1/resources/queues/smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
	my $body = '{"items":[]}' . $hidden;
	for my $case (
		[ 'two Content-Length fields', "Content-Length: 12\r\nContent-Length: " .
			length($body), 'Content-Length fields that differ' ],
		[ 'Content-Length and chunked', "Content-Length: " . length($body) .
			"\r\nTransfer-Encoding: chunked", 'both Content-Length and Transfer-Encoding' ],
	) {
		my ($name, $fields, $error) = @$case;
		my ($all, $took) = all_answers("POST /api/v1/push HTTP/1.1\r\nHost: x\r\n" .
			"Content-Type: application/json\r\n$fields\r\n\r\n$body");
		my @answers = $all =~ m{^HTTP/1\.1 (\d{3})}mg;
		is_deeply(\@answers, [400], "$name: one answer, 400");
		like($all, qr/\Q{"error":"$error"}\E/, "$name: {\"error\":\"$error\"}");
		like($all, qr/^Connection: close\r$/mi, "$name: Connection: close");
		ok($took < 4, sprintf("$name: the connection is closed (%.2f s)", $took));
	}
	my ($a) = all_answers("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n" .
		"Content-Length: 0\r\nConnection: close\r\n\r\n");
	like($a, qr{^HTTP/1\.1 200 }, 'two equal Content-Length fields are one');
	my ($s) = $q->get('/api/v1/resources/queues/smuggled');
	is($s, 404, 'nothing was pushed');
};

subtest 'an HTTP/1.1 request names exactly one host: 400 otherwise' => sub {
	my ($a) = all_answers("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
	like($a, qr{^HTTP/1\.1 400 }, 'HTTP/1.1 without Host: 400');
	like($a, qr/\Q{"error":"no Host field"}\E/, '{"error":"no Host field"}');
	($a) = all_answers("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n");
	like($a, qr{^HTTP/1\.1 400 }, 'two Host fields: 400');
	like($a, qr/\Q{"error":"more than one Host field"}\E/, '{"error":"more than one Host field"}');
	($a) = all_answers("GET /health HTTP/1.0\r\n\r\n");
	like($a, qr{^HTTP/1\.1 200 }, 'HTTP/1.0 without Host: served');
};

subtest 'body over QUEEN_MAX_BODY_BYTES: 413 {"error":"payload too large","limit":N}' => sub {
	my $small = start_queend(QUEEN_MAX_BODY_BYTES => 1024);
	my $item = { queue => 'big', transactionId => 'big-1', payload => 'x' x 2000 };
	my ($s, $b) = $small->push_items($item);
	is($s, 413, '2 KB push to a 1 KB limit: 413');
	is_deeply($b, { error => 'payload too large', limit => 1024 }, 'the documented body');
	($s) = $small->get('/api/v1/resources/queues/big');
	is($s, 404, 'nothing was written');

	my ($rs, $rb, $rh, undef, $took) = $small->raw(
		"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" .
		"Content-Length: 100000000\r\n\r\n{\"items\":[", 10);
	is($rs, 413, 'a declared 100 MB body is refused before it is sent');
	ok($took < 5, sprintf('at once, without waiting for the body (%.2f s)', $took));
	is_deeply($rb, { error => 'payload too large', limit => 1024 }, 'same body');

	my $body = to_json({ items => [ { queue => 'big', transactionId => 'fits', payload => '' } ] });
	my $pad = 1024 - length $body;
	$body = to_json({ items => [ { queue => 'big', transactionId => 'fits', payload => 'y' x $pad } ] });
	is(length $body, 1024, 'a body of exactly 1024 bytes');
	($s, $b) = $small->request('POST', '/api/v1/push', $body);
	is($s, 201, 'at the limit: accepted');
	is($b->[0]{status}, 'queued', 'and queued');
	my (undef, $h) = $small->get('/health');
	is($h->{status}, 'healthy', 'the broker is fine afterwards');
};

done_testing;
