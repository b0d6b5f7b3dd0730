#!/usr/bin/perl
# KV request errors (SPEC 13, 21): every limit (value 65536 bytes -> 413, key 512 bytes, 256
# ops, 1024 keys -> 400), exactly one of ttlSeconds/forever:true on each write, bad ops; the
# error body {"error":"<code>","reason","detail"}; a rejected call changes nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub kv_raw { $q->post_json('/api/v1/kv', [@_]) }

sub get { (kv_raw({ op => 'get', ns => $_[0], key => $_[1] }))[1]{results}[0] }

sub put { +{ op => 'put', ns => 'lim', key => $_[0], value => $_[1], forever => jtrue } }

# Sends the ops and checks the error answer; returns the body.
sub rejected {
	my ($name, $status, $code, $reason, @ops) = @_;
	my ($s, $b) = kv_raw(@ops);
	is($s, $status, "$name: $status");
	is($b->{error}, $code, "$name: error $code");
	is($b->{reason}, $reason, "$name: reason $reason");
	ok(defined $b->{detail} && length $b->{detail},
		"$name: detail says why: " . ($b->{detail} // ''));
	return $b // {};
}

subtest 'value size: 65536 bytes of JSON pass, one more is 413' => sub {
	# A JSON string of n characters is n + 2 bytes.
	my ($s, $b) = kv_raw(put('v-max', 'x' x 65534));
	is($s, 200, 'a value of exactly 65536 bytes is stored');
	is_true($b->{results}[0]{applied}, 'applied');
	is(length(get('lim', 'v-max')->{value}), 65534, 'and reads back whole');
	$b = rejected('65537 bytes', 413, 'kv_value_too_large', 'value_too_large',
		put('v-big', 'x' x 65535));
	is($b->{limit}, 65536, 'the limit is named');
	is($b->{index}, 0, 'the op is named');
	$b = rejected('a large object', 413, 'kv_value_too_large', 'value_too_large',
		{ %{ put('v-obj', undef) }, value => { map { ("k$_" => 'y' x 100) } 1 .. 700 } });
	rejected('putIfAbsent too', 413, 'kv_value_too_large', 'value_too_large',
		{ op => 'putIfAbsent', ns => 'lim', key => 'v-pia', value => [ ('z' x 1000) x 70 ],
		  ttlSeconds => 10 });
	is_false(get('lim', 'v-big')->{found}, 'nothing stored');
};

subtest 'key size: 512 bytes pass, 513 are refused' => sub {
	my ($s) = kv_raw(put('k' x 512, 1));
	is($s, 200, '512 ASCII bytes');
	($s) = kv_raw(put("\x{e9}" x 256, 1));
	is($s, 200, '256 two-byte characters = 512 bytes');
	my $b = rejected('513 bytes', 400, 'kv_limit_exceeded', 'key_too_long', put('k' x 513, 1));
	like($b->{detail}, qr/513/, 'the size is in the detail');
	rejected('257 two-byte characters', 400, 'kv_limit_exceeded', 'key_too_long',
		put("\x{e9}" x 257, 1));
	rejected('a long key in getMany', 400, 'kv_limit_exceeded', 'key_too_long',
		{ op => 'getMany', ns => 'lim', keys => [ 'a', 'b' x 600 ] });
	rejected('a long namespace', 400, 'kv_limit_exceeded', 'ns_too_long',
		{ op => 'get', ns => 'n' x 513, key => 'k' });
};

subtest '256 ops pass, 257 are refused' => sub {
	my ($s, $b) = kv_raw(map { put("op$_", $_) } 1 .. 256);
	is($s, 200, '256 ops');
	is(scalar @{ $b->{results} }, 256, '256 results');
	rejected('257 ops', 400, 'kv_limit_exceeded', 'too_many_ops',
		map { { op => 'get', ns => 'lim', key => "x$_" } } 1 .. 257);
};

subtest '1024 keys pass, 1025 are refused' => sub {
	my @keys = map { "op$_" } 1 .. 1024;
	my ($s, $b) = kv_raw({ op => 'getMany', ns => 'lim', keys => \@keys });
	is($s, 200, 'getMany of 1024 keys');
	is(scalar @{ $b->{results}[0]{rows} }, 256, 'finds the 256 written');
	is(scalar @{ $b->{results}[0]{missing} }, 768, 'and the rest missing');
	rejected('getMany of 1025 keys', 400, 'kv_limit_exceeded', 'too_many_keys',
		{ op => 'getMany', ns => 'lim', keys => [ map { "k$_" } 1 .. 1025 ] });
	rejected('keys counted over the whole call', 400, 'kv_limit_exceeded', 'too_many_keys',
		{ op => 'getMany', ns => 'lim', keys => [ map { "k$_" } 1 .. 1000 ] },
		map { put("extra$_", 1) } 1 .. 25);
	is_false(get('lim', 'extra1')->{found}, 'nothing stored');
};

subtest 'every write carries exactly one of ttlSeconds or forever:true' => sub {
	for my $op (qw(put putIfAbsent incr)) {
		my %base = (op => $op, ns => 'lim', key => "ttl-$op",
			($op eq 'incr' ? () : (value => 1)));
		rejected("$op with neither", 400, 'kv_bad_request', 'ttl', {%base});
		rejected("$op with both", 400, 'kv_bad_request', 'ttl',
			{ %base, ttlSeconds => 10, forever => jtrue });
		rejected("$op with forever:false only", 400, 'kv_bad_request', 'ttl',
			{ %base, forever => jfalse });
		my ($s) = kv_raw({ %base, ttlSeconds => 10, forever => jfalse });
		is($s, 200, "$op with ttlSeconds and forever:false is fine");
		is_true(get('lim', "ttl-$op")->{found}, "$op stored");
	}
	rejected('ttlSeconds 0', 400, 'kv_bad_request', 'bad_field',
		{ %{ put('t0', 1) }, forever => undef, ttlSeconds => 0 });
	rejected('ttlSeconds as a string', 400, 'kv_bad_request', 'bad_field',
		{ %{ put('t0', 1) }, forever => undef, ttlSeconds => '60' });
	my ($s) = kv_raw({ op => 'delete', ns => 'lim', key => 'ttl-put' });
	is($s, 200, 'a delete needs neither');
};

subtest 'malformed ops' => sub {
	rejected('unknown op', 400, 'kv_bad_request', 'unknown_op',
		{ op => 'frobnicate', ns => 'lim', key => 'k' });
	rejected('no op', 400, 'kv_bad_request', 'missing_field', { ns => 'lim', key => 'k' });
	rejected('an op that is not an object', 400, 'kv_bad_request', 'bad_op', 'get');
	rejected('no ns', 400, 'kv_bad_request', 'missing_field', { op => 'get', key => 'k' });
	rejected('no key', 400, 'kv_bad_request', 'missing_field', { op => 'get', ns => 'lim' });
	rejected('empty key', 400, 'kv_bad_request', 'bad_field',
		{ op => 'get', ns => 'lim', key => '' });
	rejected('key not a string', 400, 'kv_bad_request', 'bad_field',
		{ op => 'get', ns => 'lim', key => 7 });
	rejected('put without value', 400, 'kv_bad_request', 'missing_field',
		{ op => 'put', ns => 'lim', key => 'k', forever => jtrue });
	rejected('expect negative', 400, 'kv_bad_request', 'bad_field',
		{ %{ put('k', 1) }, expect => -1 });
	rejected('expect on putIfAbsent', 400, 'kv_bad_request', 'not_allowed',
		{ %{ put('k', 1) }, op => 'putIfAbsent', expect => 0 });
	rejected('required on a read', 400, 'kv_bad_request', 'not_allowed',
		{ op => 'get', ns => 'lim', key => 'k', required => jtrue });
	rejected('required not a boolean', 400, 'kv_bad_request', 'bad_field',
		{ %{ put('k', 1) }, required => 'yes' });
	rejected('delta not an integer', 400, 'kv_bad_request', 'bad_field',
		{ op => 'incr', ns => 'lim', key => 'c', delta => 1.5, forever => jtrue });
	rejected('getMany without keys', 400, 'kv_bad_request', 'missing_field',
		{ op => 'getMany', ns => 'lim' });
	rejected('getPrefix limit 0', 400, 'kv_bad_request', 'bad_field',
		{ op => 'getPrefix', ns => 'lim', prefix => 'a', limit => 0 });
	my ($s, $b) = $q->request('POST', '/api/v1/kv',
		'[{"op":"put","ns":"lim","key":"n\u0000l","value":1,"forever":true}]');
	is($s, 400, 'a NUL in a key: 400');
	($s, $b) = $q->request('POST', '/api/v1/kv',
		'[{"op":"put","ns":"lim","key":"nul","value":"a\u0000b","forever":true}]');
	is($s, 400, 'a NUL in a value string: 400 (jsonb cannot store it)');
	($s, $b) = $q->request('POST', '/api/v1/kv', '{"op":"get"');
	is($s, 400, 'malformed JSON: 400');
	($s, $b) = $q->post_json('/api/v1/kv', { ops => [] });
	is($s, 400, 'an object without operations: 400');
	($s, $b) = $q->post_json('/api/v1/kv', 'get');
	is($s, 400, 'a string body: 400');
	($s, $b) = $q->request('POST', '/api/v1/kv');
	is($s, 400, 'no body: 400');
};

subtest 'a rejected call changes nothing' => sub {
	my $b = rejected('a bad op after good writes', 400, 'kv_bad_request', 'ttl',
		put('atomic-1', 1),
		{ op => 'incr', ns => 'lim', key => 'atomic-2', forever => jtrue },
		{ op => 'put', ns => 'lim', key => 'atomic-3', value => 3 });
	is($b->{index}, 2, 'index names the bad op');
	like($b->{detail}, qr/operations\[2\]/, 'so does the detail');
	is_false(get('lim', 'atomic-1')->{found}, 'first write not applied');
	is_false(get('lim', 'atomic-2')->{found}, 'second write not applied');
	rejected('a value too large after good writes', 413, 'kv_value_too_large',
		'value_too_large',
		put('atomic-4', 1), put('atomic-5', 'x' x 70000));
	is_false(get('lim', 'atomic-4')->{found}, 'not applied either');
};

done_testing;
