#!/usr/bin/perl
# KV expiry (SPEC 13): an expired key reads as absent in get, getMany and getPrefix, can be
# created again (with a larger version), and is pruned from the table in the background.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

sub kv {
	my ($s, $b) = $q->post_json('/api/v1/kv', [@_]);
	die "kv: status $s: " . to_json($b) . "\n" unless $s == 200 && ref $b->{results} eq 'ARRAY';
	return $b->{results};
}

sub get { kv({ op => 'get', ns => $_[0], key => $_[1] })->[0] }

subtest 'ttlSeconds 1: the key expires' => sub {
	my $r = kv(
		{ op => 'put', ns => 'ttl', key => 'short', value => 'soon gone', ttlSeconds => 1 },
		{ op => 'put', ns => 'ttl', key => 'long', value => 'stays', ttlSeconds => 3600 },
		{ op => 'put', ns => 'ttl', key => 'forever', value => 'stays', forever => jtrue },
		{ op => 'incr', ns => 'ttl', key => 'window', delta => 5, ttlSeconds => 1 });
	my $v = $r->[0]{version};
	my $gone = wait_until(sub { !get('ttl', 'short')->{found} }, 30, 0.2);
	ok($gone, 'get: found false once expired');
	my $g = get('ttl', 'short');
	is_null($g, 'value');
	is_null($g, 'version');
	ok(wait_until(sub { !get('ttl', 'window')->{found} }, 30, 0.2), 'the counter expired too');

	$r = kv({ op => 'getMany', ns => 'ttl', keys => [qw(short long forever)] });
	is_deeply([ map { $_->{key} } @{ $r->[0]{rows} } ], [qw(long forever)],
		'getMany: live keys only');
	is_deeply($r->[0]{missing}, ['short'], 'getMany: the expired key is missing');
	$r = kv({ op => 'getPrefix', ns => 'ttl', prefix => '' });
	is_deeply([ sort map { $_->{key} } @{ $r->[0]{rows} } ], [qw(forever long)],
		'getPrefix skips it');

	$r = kv({ op => 'putIfAbsent', ns => 'ttl', key => 'short', value => 'again',
		ttlSeconds => 60 });
	is_true($r->[0]{applied}, 'putIfAbsent on an expired key: applied');
	cmp_ok($r->[0]{version}, '>', $v, 'with a larger version than the expired one');
	$r = kv({ op => 'incr', ns => 'ttl', key => 'window', delta => 1, ttlSeconds => 60 });
	is($r->[0]{value}, 1, 'incr of an expired counter starts again from 0');
	$r = kv({ op => 'delete', ns => 'ttl', key => 'long' });
	is_true($r->[0]{applied}, 'a live key with a TTL deletes');
};

subtest 'expect 0 treats an expired key as missing; a write resets the expiry' => sub {
	kv({ op => 'put', ns => 'ttl2', key => 'k', value => 1, ttlSeconds => 1 },
		{ op => 'put', ns => 'ttl2', key => 'keep', value => 1, ttlSeconds => 1 });
	kv({ op => 'put', ns => 'ttl2', key => 'keep', value => 2, forever => jtrue });
	ok(wait_until(sub { !get('ttl2', 'k')->{found} }, 30, 0.2), 'k expired');
	my $r = kv({ op => 'put', ns => 'ttl2', key => 'k', value => 2, forever => jtrue,
		expect => 0 });
	is_true($r->[0]{applied}, 'expect 0 holds on an expired key');
	my $keep = get('ttl2', 'keep');
	is_true($keep->{found}, 'a key rewritten with forever does not expire');
	is_null($keep, 'expiresAt');
};

subtest 'expired keys are pruned from the table' => sub {
	kv(map { +{ op => 'put', ns => 'prune', key => "p$_", value => $_, ttlSeconds => 1 } }
		1 .. 50);
	kv({ op => 'put', ns => 'prune', key => 'live', value => 1, forever => jtrue });
	my $rows = sub { $pg->psql("SELECT count(*) FROM queen_kv WHERE ns = 'prune'") };
	is($rows->(), 51, '51 rows stored');
	# The maintenance task runs every 10 s: allow a few rounds on a loaded machine.
	my $pruned = wait_until(sub { $rows->() eq '1' }, 90, 0.5);
	ok($pruned, 'only the live key is left in the table') or diag('rows: ' . $rows->());
	is(get('prune', 'live')->{value}, 1, 'the live key is untouched');
	my $r = kv({ op => 'put', ns => 'prune', key => 'p1', value => 'new', forever => jtrue });
	my $max = $pg->psql("SELECT last_value FROM queen_kv_version");
	is($r->[0]{version}, $max, 'a pruned key re-created takes a fresh version');
};

done_testing;
