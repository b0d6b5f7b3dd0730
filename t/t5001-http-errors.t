#!/usr/bin/perl
# HTTP-level errors (SPEC 2, 20): unknown routes, wrong methods, malformed bodies and bodies
# over the limit get the documented answer -- and a rejected request changes nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
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
