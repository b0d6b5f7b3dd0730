#!/usr/bin/perl
# required:true (SPEC 13): when a required op loses its precondition the whole call is undone
# and answered {"ok":false,"reason":"kv_precondition","failedIndex":N,"kvReason",...}; ops
# without required only report applied:false and the call goes on.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub kv_raw { $q->post_json('/api/v1/kv', [@_]) }

sub kv {
	my ($s, $b) = kv_raw(@_);
	die "kv: status $s: " . to_json($b) . "\n" unless $s == 200 && ref $b->{results} eq 'ARRAY';
	return $b->{results};
}

sub get { kv({ op => 'get', ns => $_[0], key => $_[1] })->[0] }

my $lock_v = kv({ op => 'put', ns => 'rq', key => 'lock', value => { owner => 'first' },
	forever => jtrue })->[0]{version};
kv({ op => 'put', ns => 'rq', key => 'keep', value => 'old', forever => jtrue });

subtest 'a lost putIfAbsent aborts the call: earlier writes are not visible' => sub {
	my ($s, $b) = kv_raw(
		{ op => 'put', ns => 'rq', key => 'x', value => 1, forever => jtrue },
		{ op => 'incr', ns => 'rq', key => 'n', delta => 1, forever => jtrue },
		{ op => 'put', ns => 'rq', key => 'keep', value => 'new', forever => jtrue },
		{ op => 'delete', ns => 'rq', key => 'gone-not' },
		{ op => 'putIfAbsent', ns => 'rq', key => 'lock', value => { owner => 'second' },
		  forever => jtrue, required => jtrue },
		{ op => 'put', ns => 'rq', key => 'after', value => 1, forever => jtrue });
	is($s, 200, 'still 200');
	is_false($b->{ok}, 'ok false');
	is($b->{reason}, 'kv_precondition', 'reason kv_precondition');
	is($b->{failedIndex}, 4, 'failedIndex names the op');
	is($b->{kvReason}, 'exists', 'kvReason exists');
	is($b->{version}, $lock_v, 'the current version');
	is_deeply($b->{value}, { owner => 'first' }, 'the current value');
	ok(!exists $b->{results} || !@{ $b->{results} }, 'no results');

	is_false(get('rq', 'x')->{found}, 'the put before it was undone');
	is_false(get('rq', 'n')->{found}, 'the incr before it was undone');
	is(get('rq', 'keep')->{value}, 'old', 'the overwrite before it was undone');
	is_false(get('rq', 'after')->{found}, 'the op after it never ran');
	is_deeply(get('rq', 'lock')->{value}, { owner => 'first' },
		'the lock still holds the first owner');
	is(get('rq', 'lock')->{version}, $lock_v, 'with its version');
};

subtest 'a lost expect, incr past max, delete of a missing key' => sub {
	my ($s, $b) = kv_raw({ op => 'put', ns => 'rq', key => 'y', value => 1, forever => jtrue },
		{ op => 'put', ns => 'rq', key => 'lock', value => 'stolen', forever => jtrue,
		  expect => $lock_v + 1000, required => jtrue });
	is_false($b->{ok}, 'expect mismatch: ok false');
	is($b->{failedIndex}, 1, 'failedIndex 1');
	is($b->{kvReason}, 'version', 'kvReason version');
	is($b->{version}, $lock_v, 'the current version');
	is_false(get('rq', 'y')->{found}, 'nothing written');

	kv({ op => 'incr', ns => 'rq', key => 'quota', delta => 9, forever => jtrue });
	($s, $b) = kv_raw({ op => 'put', ns => 'rq', key => 'z', value => 1, forever => jtrue },
		{ op => 'incr', ns => 'rq', key => 'quota', delta => 2, max => 10, forever => jtrue,
		  required => jtrue });
	is_false($b->{ok}, 'incr past max: ok false');
	is($b->{kvReason}, 'limit', 'kvReason limit');
	is($b->{value}, 9, 'the counter as it is');
	is(get('rq', 'quota')->{value}, 9, 'the counter is unchanged');
	is_false(get('rq', 'z')->{found}, 'nothing written');

	($s, $b) = kv_raw({ op => 'delete', ns => 'rq', key => 'never-was', required => jtrue });
	is_false($b->{ok}, 'required delete of a missing key: ok false');
	is($b->{kvReason}, 'absent', 'kvReason absent');
};

subtest 'required ops that hold: a normal answer' => sub {
	my ($s, $b) = kv_raw({ op => 'putIfAbsent', ns => 'rq', key => 'fresh', value => 1,
			forever => jtrue, required => jtrue },
		{ op => 'put', ns => 'rq', key => 'lock', value => 'mine', forever => jtrue,
		  expect => $lock_v, required => jtrue },
		{ op => 'incr', ns => 'rq', key => 'quota', delta => 1, max => 10, forever => jtrue,
		  required => jtrue });
	is($s, 200, 'status 200');
	is_true($b->{ok}, 'ok true');
	is(scalar @{ $b->{results} }, 3, 'three results');
	ok(!grep({ !$_->{applied} } @{ $b->{results} }), 'all applied');
	is(get('rq', 'lock')->{value}, 'mine', 'written');
	is(get('rq', 'quota')->{value}, 10, 'counted');
};

subtest 'without required a lost precondition is only a verdict' => sub {
	my $r = kv({ op => 'put', ns => 'rq', key => 'w1', value => 1, forever => jtrue },
		{ op => 'putIfAbsent', ns => 'rq', key => 'lock', value => 'x', forever => jtrue },
		{ op => 'put', ns => 'rq', key => 'w2', value => 2, forever => jtrue,
		  required => jfalse });
	is_false($r->[1]{applied}, 'the putIfAbsent is not applied');
	is($r->[1]{reason}, 'exists', 'reason exists');
	is_true($r->[2]{applied}, 'the call went on');
	is(get('rq', 'w1')->{value}, 1, 'the write before it stays');
	is(get('rq', 'w2')->{value}, 2, 'the write after it stays');
};

subtest 'a failed call does not spend a version the key can see' => sub {
	my $v = get('rq', 'keep')->{version};
	kv_raw({ op => 'put', ns => 'rq', key => 'keep', value => 'tmp', forever => jtrue },
		{ op => 'putIfAbsent', ns => 'rq', key => 'lock', value => 1, forever => jtrue,
		  required => jtrue });
	is(get('rq', 'keep')->{version}, $v, 'version unchanged after the undone write');
	my $r = kv({ op => 'put', ns => 'rq', key => 'keep', value => 'next', forever => jtrue,
		expect => $v });
	is_true($r->[0]{applied}, 'the version read before still fences in');
	cmp_ok($r->[0]{version}, '>', $v, 'and the next write gets a larger version');
};

done_testing;
