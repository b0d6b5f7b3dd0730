#!/usr/bin/perl
# The KV sugar routes (SPEC 13, 21): GET /api/v1/kv/:ns/*key answers the get result element
# with an ETag holding the version (a missing key is 200 found:false), PUT writes
# {"value","ttlSeconds"|"forever","expect"?}, DELETE takes an optional {"expect"}.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

# /api/v1/kv/<ns>/<key>, percent-encoding the UTF-8 bytes of each (slashes of the key kept).
sub path {
	return '/api/v1/kv/' . join('/', map {
		my $s = $_;
		utf8::encode($s);
		$s =~ s/([^A-Za-z0-9_.~\/-])/sprintf('%%%02X', ord $1)/ge;
		$s
	} @_);
}

# The ETag header as a number (the version), quotes stripped.
sub etag { my $h = shift; my $t = $h->{etag} // return undef; $t =~ s/^(?:W\/)?"(.*)"$/$1/; $t }

subtest 'PUT, GET, ETag' => sub {
	my ($s, $b, $h) = $q->put_json(path('app', 'feature/flags'),
		{ value => { dark => jtrue }, forever => jtrue });
	is($s, 200, 'PUT 200');
	is($b->{op}, 'put', 'the put result element');
	is_true($b->{applied}, 'applied');
	is($b->{key}, 'feature/flags', 'key with a slash');
	my $v = $b->{version};
	like($v, qr/^\d+$/, 'version');
	is(etag($h), $v, 'PUT: ETag is the new version');

	($s, $b, $h) = $q->get(path('app', 'feature/flags'));
	is($s, 200, 'GET 200');
	is($b->{op}, 'get', 'the get result element');
	is_true($b->{found}, 'found');
	is_deeply($b->{value}, { dark => jtrue }, 'value');
	is($b->{version}, $v, 'version');
	is_null($b, 'expiresAt');
	like($b->{updatedAt}, iso_re, 'updatedAt');
	is(etag($h), $v, 'GET: ETag = version');
	like($h->{etag}, qr/^"\d+"$/, 'ETag is a quoted strong tag');

	my (undef, $post) = $q->post_json('/api/v1/kv',
		[ { op => 'get', ns => 'app', key => 'feature/flags' } ]);
	is_deeply($b, $post->{results}[0], 'the same element as POST /api/v1/kv answers');
};

subtest 'a missing key is 200 found:false without ETag' => sub {
	my ($s, $b, $h) = $q->get(path('app', 'nothing/here'));
	is($s, 200, '200, not 404');
	is_false($b->{found}, 'found false');
	is_null($b, 'value');
	is_null($b, 'version');
	ok(!defined $h->{etag}, 'no ETag');
};

subtest 'PUT with expect and TTL' => sub {
	my ($s, $b) = $q->put_json(path('app', 'cfg'), { value => 1, ttlSeconds => 3600 });
	my $v = $b->{version};
	my (undef, $g) = $q->get(path('app', 'cfg'));
	ok(defined $g->{expiresAt}, 'ttlSeconds sets expiresAt');
	my $h;
	($s, $b, $h) = $q->put_json(path('app', 'cfg'),
		{ value => 2, forever => jtrue, expect => $v + 1000 });
	is($s, 200, 'stale expect: still 200');
	is_false($b->{applied}, 'not applied');
	is($b->{reason}, 'version', 'reason version');
	is($b->{version}, $v, 'current version');
	ok(!defined $h->{etag}, 'no ETag for a write that did not happen');
	($s, $b) = $q->put_json(path('app', 'cfg'), { value => 2, forever => jtrue, expect => $v });
	is_true($b->{applied}, 'current expect: applied');
	cmp_ok($b->{version}, '>', $v, 'new version');
	($s, $b) = $q->put_json(path('app', 'brand-new'),
		{ value => 'x', forever => jtrue, expect => 0 });
	is_true($b->{applied}, 'expect 0 creates');
	($s, $b) = $q->put_json(path('app', 'brand-new'),
		{ value => 'y', forever => jtrue, expect => 0, required => jtrue });
	is_false($b->{ok}, 'required and lost: the precondition verdict');
	is($b->{reason}, 'kv_precondition', 'reason kv_precondition');
	is($b->{kvReason}, 'version', 'kvReason version');
	(undef, $g) = $q->get(path('app', 'brand-new'));
	is($g->{value}, 'x', 'unchanged');
};

subtest 'DELETE with and without expect' => sub {
	my (undef, $b) = $q->put_json(path('app', 'del/me'), { value => 1, forever => jtrue });
	my $v = $b->{version};
	my ($s) = $q->request('DELETE', path('app', 'del/me'), to_json({ expect => $v + 1000 }));
	is($s, 200, 'stale expect: 200');
	my (undef, $g) = $q->get(path('app', 'del/me'));
	is_true($g->{found}, 'still there');
	($s, $b) = $q->request('DELETE', path('app', 'del/me'), to_json({ expect => $v }));
	is_true($b->{applied}, 'current expect: deleted');
	is($b->{op}, 'delete', 'the delete result element');
	is($b->{version}, $v, 'the version removed');
	(undef, $g) = $q->get(path('app', 'del/me'));
	is_false($g->{found}, 'gone');

	$q->put_json(path('app', 'del/plain'), { value => 1, forever => jtrue });
	($s, $b) = $q->del(path('app', 'del/plain'));
	is($s, 200, 'DELETE without a body');
	is_true($b->{applied}, 'deleted');
	($s, $b) = $q->del(path('app', 'del/plain'));
	is_false($b->{applied}, 'again: not applied');
	is($b->{reason}, 'absent', 'reason absent');
};

subtest 'percent-encoded and unicode keys' => sub {
	my $key = "r\x{e9}sum\x{e9} 2026/q1?x=1#frag";
	my ($s, $b) = $q->put_json(path('docs', $key), { value => 'v', forever => jtrue });
	is($s, 200, 'PUT');
	is($b->{key}, $key, 'the decoded key');
	my (undef, $post) = $q->post_json('/api/v1/kv',
		[ { op => 'get', ns => 'docs', key => $key } ]);
	is($post->{results}[0]{value}, 'v', 'the same key through POST');
};

subtest 'errors on the sugar routes' => sub {
	my ($s, $b) = $q->put_json(path('app', 'nottl'), { value => 1 });
	is($s, 400, 'PUT without ttlSeconds or forever: 400');
	is($b->{error}, 'kv_bad_request', 'kv_bad_request');
	is($b->{reason}, 'ttl', 'reason ttl');
	($s, $b) = $q->put_json(path('app', 'novalue'), { forever => jtrue });
	is($s, 400, 'PUT without value: 400');
	($s, $b) = $q->put_json(path('app', 'big'), { value => 'x' x 70000, forever => jtrue });
	is($s, 413, 'PUT of a value over 65536 bytes: 413');
	is($b->{error}, 'kv_value_too_large', 'kv_value_too_large');
	($s, $b) = $q->put_json(path('app', 'k' x 513), { value => 1, forever => jtrue });
	is($s, 400, 'PUT of a key over 512 bytes: 400');
	is($b->{reason}, 'key_too_long', 'key_too_long');
	($s, $b) = $q->request('PUT', path('app', 'x'));
	is($s, 400, 'PUT without a body: 400');
	($s, $b) = $q->put_json(path('app', 'x'), [1]);
	is($s, 400, 'PUT of an array: 400');
	($s, $b) = $q->request('DELETE', path('app', 'x'), to_json({ expect => 'one' }));
	is($s, 400, 'DELETE with a bad expect: 400');
	my (undef, $g) = $q->get(path('app', 'nottl'));
	is_false($g->{found}, 'nothing was written');
	my $h;
	($s, $b, $h) = $q->request('POST', path('app', 'x'), '{}');
	is($s, 405, 'POST on a key: 405');
	like($h->{allow} // '', qr/GET/, 'Allow lists GET');
	like($h->{allow} // '', qr/PUT/, 'and PUT');
	like($h->{allow} // '', qr/DELETE/, 'and DELETE');
	($s, $b) = $q->get('/api/v1/kv/app/%FF%FE');
	is($s, 400, 'a key that is not UTF-8: 400');
	is($b->{error}, 'kv_bad_request', 'kv_bad_request');
	($s) = $q->get('/api/v1/kv/app');
	is($s, 404, 'a namespace without a key is not a route');
};

done_testing;
