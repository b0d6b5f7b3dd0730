#!/usr/bin/perl
# Key/value ops and their result shapes (SPEC 13): get, getMany, getPrefix with paging, put,
# putIfAbsent, delete, incr with max, expect, and versions that increase on every write of a
# key, across delete and re-create.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

# POST /api/v1/kv with the given ops; returns the results array (dies unless 200 + results).
sub kv {
	my @ops = @_;
	my ($s, $b) = $q->post_json('/api/v1/kv', \@ops);
	die "kv: status $s: " . to_json($b) . "\n" unless $s == 200 && ref $b->{results} eq 'ARRAY';
	return $b->{results};
}

# Op builders: put/putIfAbsent default to forever:true unless ttlSeconds is given.
sub op { my ($op, $ns, $key, %f) = @_; +{ op => $op, ns => $ns, key => $key, %f } }
sub put {
	my ($ns, $key, $value, %f) = @_;
	%f = (forever => jtrue, %f) unless exists $f{ttlSeconds};
	return op(delete $f{op} // 'put', $ns, $key, value => $value, %f);
}
sub pia { put(@_[0 .. 2], op => 'putIfAbsent', @_[3 .. $#_]) }
sub get { op('get', @_) }

subtest 'put then get: the shapes' => sub {
	my $r = kv(put('app', 'cfg', { a => 1, b => [ 1, 2 ] }));
	is(scalar @$r, 1, 'one result');
	is($r->[0]{index}, 0, 'index');
	is($r->[0]{op}, 'put', 'op');
	is_true($r->[0]{applied}, 'applied');
	ok(!exists $r->[0]{reason}, 'no reason when applied');
	is($r->[0]{key}, 'cfg', 'key');
	like($r->[0]{version}, qr/^[1-9]\d*$/, 'a positive version');
	my $v = $r->[0]{version};

	$r = kv(get('app', 'cfg'), get('app', 'nope'), get('other', 'cfg'));
	my $g = $r->[0];
	is($g->{index}, 0, 'get index');
	is($g->{op}, 'get', 'get op');
	is_true($g->{found}, 'found');
	is($g->{key}, 'cfg', 'key');
	is_deeply($g->{value}, { a => 1, b => [ 1, 2 ] }, 'value as stored');
	is($g->{version}, $v, 'version of the put');
	is_null($g, 'expiresAt', 'forever: expiresAt null');
	like($g->{updatedAt}, iso_re, 'updatedAt');
	is($r->[1]{index}, 1, 'second result index');
	is_false($r->[1]{found}, 'missing key: found false');
	is_null($r->[1], 'value');
	is_null($r->[1], 'version');
	is_false($r->[2]{found}, 'namespaces are separate');

	$r = kv(put('app', 'ttl', 'x', ttlSeconds => 3600), get('app', 'ttl'));
	my $exp = iso_epoch($r->[1]{expiresAt});
	ok(defined $exp && abs($exp - time - 3600) < 300,
		"expiresAt about an hour ahead: $r->[1]{expiresAt}");
	$r = kv(put('app', 'null', undef), get('app', 'null'));
	is_true($r->[1]{found}, 'a JSON null value is a value');
	is_null($r->[1], 'value');
};

subtest 'versions increase on every write, across delete and re-create' => sub {
	my @v;
	push @v, kv(put('ver', 'k', 1))->[0]{version};
	push @v, kv(put('ver', 'k', 2))->[0]{version};
	push @v, kv(op('incr', 'ver', 'k', delta => 5, forever => jtrue))->[0]{version};
	my $d = kv(op('delete', 'ver', 'k'))->[0];
	is_true($d->{applied}, 'deleted');
	is($d->{version}, $v[-1], 'delete answers the version it removed');
	is_false(kv(get('ver', 'k'))->[0]{found}, 'gone');
	push @v, kv(pia('ver', 'k', 3))->[0]{version};
	push @v, kv(put('ver', 'k', 4, ttlSeconds => 60))->[0]{version};
	for my $i (1 .. $#v) {
		cmp_ok($v[$i], '>', $v[$i - 1], "write $i: version $v[$i] > $v[$i - 1]");
	}
	my $r = kv(map { put('ver', 'same', $_) } 1 .. 3);
	ok($r->[0]{version} < $r->[1]{version} && $r->[1]{version} < $r->[2]{version},
		'three writes of one key in one call: increasing versions');
};

subtest 'expect: a fencing precondition' => sub {
	my $v1 = kv(put('ex', 'k', 'a'))->[0]{version};
	my $r = kv(put('ex', 'k', 'b', expect => $v1 + 1000));
	is_false($r->[0]{applied}, 'wrong version: not applied');
	is($r->[0]{reason}, 'version', 'reason version');
	is($r->[0]{version}, $v1, 'answers the current version');
	is($r->[0]{value}, 'a', 'and the current value');
	is(kv(get('ex', 'k'))->[0]{value}, 'a', 'value unchanged');

	$r = kv(put('ex', 'k', 'b', expect => $v1));
	is_true($r->[0]{applied}, 'right version: applied');
	my $v2 = $r->[0]{version};
	cmp_ok($v2, '>', $v1, 'new version');
	$r = kv(put('ex', 'k', 'c', expect => $v1));
	is_false($r->[0]{applied}, 'the old version no longer fences in');

	$r = kv(put('ex', 'k', 'c', expect => 0));
	is_false($r->[0]{applied}, 'expect 0 on an existing key: not applied');
	is($r->[0]{reason}, 'version', 'reason version');
	$r = kv(put('ex', 'new', 'n', expect => 0));
	is_true($r->[0]{applied}, 'expect 0 on a missing key: created');

	$r = kv({ op => 'delete', ns => 'ex', key => 'k', expect => $v1 });
	is_false($r->[0]{applied}, 'delete with a stale version: not applied');
	is($r->[0]{reason}, 'version', 'reason version');
	$r = kv({ op => 'delete', ns => 'ex', key => 'k', expect => $v2 });
	is_true($r->[0]{applied}, 'delete with the current version: applied');
	$r = kv({ op => 'delete', ns => 'ex', key => 'k' });
	is_false($r->[0]{applied}, 'deleting a missing key: not applied');
	is($r->[0]{reason}, 'absent', 'reason absent');
	$r = kv(put('ex', 'k', 'z', expect => $v2));
	is_false($r->[0]{applied}, 'a deleted key has no version to match');
};

subtest 'putIfAbsent' => sub {
	my $r = kv(pia('pia', 'k', { owner => 'a' }));
	is_true($r->[0]{applied}, 'absent: written');
	my $v = $r->[0]{version};
	$r = kv(pia('pia', 'k', { owner => 'b' }));
	is($r->[0]{op}, 'putIfAbsent', 'op');
	is_false($r->[0]{applied}, 'present: not written');
	is($r->[0]{reason}, 'exists', 'reason exists');
	is($r->[0]{version}, $v, 'with the current version');
	is_deeply($r->[0]{value}, { owner => 'a' }, 'and the current value');
	is_deeply(kv(get('pia', 'k'))->[0]{value}, { owner => 'a' }, 'first one kept');
};

subtest 'incr: counters and max' => sub {
	my $r = kv({ op => 'incr', ns => 'cnt', key => 'c', delta => 2, forever => jtrue });
	is($r->[0]{op}, 'incr', 'op');
	is_true($r->[0]{applied}, 'a missing counter starts at 0');
	is($r->[0]{value}, 2, 'value 2');
	$r = kv({ op => 'incr', ns => 'cnt', key => 'c', forever => jtrue });
	is($r->[0]{value}, 3, 'delta defaults to 1');
	$r = kv({ op => 'incr', ns => 'cnt', key => 'c', delta => -10, forever => jtrue });
	is($r->[0]{value}, -7, 'negative delta');
	$r = kv({ op => 'incr', ns => 'cnt', key => 'c', delta => 10, max => 5, forever => jtrue });
	is_true($r->[0]{applied}, 'up to max: applied');
	is($r->[0]{value}, 3, 'value 3');
	my $v = $r->[0]{version};
	$r = kv({ op => 'incr', ns => 'cnt', key => 'c', delta => 3, max => 5, forever => jtrue });
	is_false($r->[0]{applied}, 'past max: not applied');
	is($r->[0]{reason}, 'limit', 'reason limit');
	is($r->[0]{value}, 3, 'the counter is unchanged');
	is($r->[0]{version}, $v, 'and so is its version');
	$r = kv({ op => 'incr', ns => 'cnt', key => 'c', delta => 2, max => 5, forever => jtrue });
	is_true($r->[0]{applied}, 'exactly max: applied');
	is($r->[0]{value}, 5, 'value 5');
	is(kv({ op => 'get', ns => 'cnt', key => 'c' })->[0]{value}, 5, 'get reads the counter');

	$r = kv(op('incr', 'cnt', 'rate', delta => 1, max => 2, ttlSeconds => 60)) for 1 .. 3;
	is($r->[0]{reason}, 'limit', 'a rate limiter: the third hit is refused');

	kv({ op => 'put', ns => 'cnt', key => 's', value => 'text', forever => jtrue });
	$r = kv({ op => 'incr', ns => 'cnt', key => 's', forever => jtrue });
	is_false($r->[0]{applied}, 'incr of a non-number: not applied');
	is($r->[0]{reason}, 'not_a_number', 'reason not_a_number');
	is($r->[0]{value}, 'text', 'value untouched');
};

subtest 'getMany' => sub {
	kv(map { put('gm', "k$_", $_) } 1 .. 3);
	my $r = kv({ op => 'getMany', ns => 'gm', keys => [ 'k3', 'x', 'k1', 'y' ] });
	is($r->[0]{op}, 'getMany', 'op');
	is_deeply([ map { [ $_->{key}, $_->{value} ] } @{ $r->[0]{rows} } ],
		[ [ 'k3', 3 ], [ 'k1', 1 ] ], 'rows of the keys found, in the order asked');
	ok(!grep({ !defined $_->{version} } @{ $r->[0]{rows} }), 'each row has its version');
	is_deeply($r->[0]{missing}, [ 'x', 'y' ], 'missing keys');
	$r = kv({ op => 'getMany', ns => 'gm', keys => [] });
	is_deeply([ $r->[0]{rows}, $r->[0]{missing} ], [ [], [] ], 'no keys: empty lists');
};

subtest 'getPrefix: order, paging, cap' => sub {
	my @users = map { sprintf('user:%03d', $_) } 1 .. 25;
	kv(map { put('gp', $_, $_) } reverse @users);
	kv(put('gp', 'user;', 'after the prefix'), put('gp', 'use', 'before'),
		put('gp', 'zzz', 'z'));
	my $r = kv({ op => 'getPrefix', ns => 'gp', prefix => 'user:' })->[0];
	is($r->{op}, 'getPrefix', 'op');
	is(scalar @{ $r->{rows} }, 25, 'every key of the prefix, none other');
	is_deeply([ map { $_->{key} } @{ $r->{rows} } ], \@users, 'in key order');
	is_false($r->{truncated}, 'not truncated');
	is_null($r, 'nextAfter');

	my (@seen, $after, $pages);
	while (1) {
		my $p = kv({ op => 'getPrefix', ns => 'gp', prefix => 'user:', limit => 10,
			(defined $after ? (after => $after) : ()) })->[0];
		push @seen, map { $_->{key} } @{ $p->{rows} };
		last if ++$pages > 10 || !$p->{truncated};
		ok(@{ $p->{rows} } == 10, "page $pages is full");
		is($p->{nextAfter}, $seen[-1], 'nextAfter is the last key of the page');
		$after = $p->{nextAfter};
	}
	is($pages, 3, 'three pages of at most 10');
	is_deeply(\@seen, \@users, 'paging sees every key once');

	$r = kv({ op => 'getPrefix', ns => 'gp', prefix => '' })->[0];
	is(scalar @{ $r->{rows} }, 28, 'an empty prefix lists the namespace');
	is_deeply([ map { $_->{key} } @{ $r->{rows} }[ 0, -1 ] ], [ 'use', 'zzz' ],
		'bytewise order');

	my @ops;
	for my $i (0 .. 1100) {
		push @ops, put('big', sprintf('k%05d', $i), $i);
		if (@ops == 256) { kv(@ops); @ops = () }
	}
	kv(@ops) if @ops;
	$r = kv({ op => 'getPrefix', ns => 'big', prefix => 'k' })->[0];
	is(scalar @{ $r->{rows} }, 100, 'default limit 100');
	is_true($r->{truncated}, 'truncated');
	$r = kv({ op => 'getPrefix', ns => 'big', prefix => 'k', limit => 5000 })->[0];
	is(scalar @{ $r->{rows} }, 1000, 'limit is capped at 1000');
	is_true($r->{truncated}, 'and the answer says there is more');
	is($r->{nextAfter}, 'k00999', 'nextAfter pages on');
};

subtest 'ops apply in order and results align with the input' => sub {
	my $r = kv({ op => 'get', ns => 'ord', key => 'a' },
		{ op => 'put', ns => 'ord', key => 'a', value => 1, forever => jtrue },
		{ op => 'get', ns => 'ord', key => 'a' },
		{ op => 'incr', ns => 'ord', key => 'a', delta => 1, forever => jtrue },
		{ op => 'getMany', ns => 'ord', keys => ['a'] },
		{ op => 'delete', ns => 'ord', key => 'a' },
		{ op => 'get', ns => 'ord', key => 'a' });
	is_deeply([ map { $_->{index} } @$r ], [ 0 .. 6 ], 'one result per op, in order');
	is_deeply([ map { $_->{op} } @$r ], [qw(get put get incr getMany delete get)], 'ops named');
	is_false($r->[0]{found}, 'before the put: absent');
	is($r->[2]{value}, 1, 'after the put: 1');
	is($r->[3]{value}, 2, 'incr sees the put');
	is($r->[4]{rows}[0]{value}, 2, 'getMany sees the incr');
	is_false($r->[6]{found}, 'after the delete: absent');

	my ($s, $b) = $q->post_json('/api/v1/kv', { operations => [ get('ord', 'a') ] });
	is($s, 200, '{"operations":[...]} is accepted');
	is(scalar @{ $b->{results} }, 1, 'with its results');
	($s, $b) = $q->post_json('/api/v1/kv', []);
	is($s, 200, 'no ops: 200');
	is_deeply($b->{results}, [], 'no results');
};

subtest 'keys and values beyond ASCII, and odd keys' => sub {
	my $key = "caf\x{e9}/\x{1f600} spaced key";
	my $r = kv(put("n\x{e4}s", $key, { t => "\x{263a}" }), get("n\x{e4}s", $key));
	is($r->[1]{key}, $key, 'unicode key round-trips');
	is_deeply($r->[1]{value}, { t => "\x{263a}" }, 'unicode value round-trips');
	$r = kv(put('odd', q{it's "quoted" %_\\}, 1),
		{ op => 'getPrefix', ns => 'odd', prefix => q{it's "quoted" %} });
	is(scalar @{ $r->[1]{rows} }, 1, 'quotes and LIKE characters in a prefix are literal');
	$r = kv({ op => 'getPrefix', ns => 'odd', prefix => 'it%' });
	is(scalar @{ $r->[0]{rows} }, 0, '% in a prefix is not a wildcard');
};

done_testing;
