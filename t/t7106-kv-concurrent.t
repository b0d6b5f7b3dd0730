#!/usr/bin/perl
# KV under concurrent clients (SPEC 13): writes of one key are serialised, so increments are
# never lost, exactly one putIfAbsent wins, versions handed out are all distinct, and a
# compare-and-set loop on expect converges.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend(DB_POOL_SIZE => 4);

my ($W, $N) = (4, 25);

sub kv {
	my ($s, $b) = $q->post_json('/api/v1/kv', [@_]);
	die "kv: status $s: " . to_json($b) . "\n" unless $s == 200 && ref $b->{results} eq 'ARRAY';
	return $b->{results};
}

subtest 'concurrent incr: no lost update, distinct versions' => sub {
	my @kids = map { bg(sub {
		[ map { kv({ op => 'incr', ns => 'cc', key => 'hits', delta => 1,
			forever => jtrue })->[0]{version} } 1 .. $N ]
	}) } 1 .. $W;
	my @versions = map { my $r = $_->result(120); ref $r eq 'ARRAY' ? @$r : () } @kids;
	is(scalar @versions, $W * $N, 'every increment answered');
	my %seen;
	$seen{$_}++ for @versions;
	is(scalar keys %seen, $W * $N, 'every write got its own version');
	my $g = kv({ op => 'get', ns => 'cc', key => 'hits' })->[0];
	is($g->{value}, $W * $N, 'the counter counted every increment');
	my ($max) = sort { $b <=> $a } @versions;
	is($g->{version}, $max, 'the stored version is the largest handed out');
};

subtest 'concurrent putIfAbsent: exactly one wins' => sub {
	for my $round (1 .. 3) {
		my @kids = map { my $w = $_; bg(sub {
			kv({ op => 'putIfAbsent', ns => 'cc', key => "lock$round", value => "w$w",
				ttlSeconds => 60 })->[0]
		}) } 1 .. $W;
		my @r = map { $_->result(120) } @kids;
		my @won = grep { ref $_ eq 'HASH' && $_->{applied} } @r;
		is(scalar @won, 1, "round $round: one winner");
		is(scalar(grep { ref $_ eq 'HASH' && ($_->{reason} // '') eq 'exists' } @r),
			$W - 1, "round $round: the others see exists");
		my $g = kv({ op => 'get', ns => 'cc', key => "lock$round" })->[0];
		is($g->{version}, $won[0]{version}, "round $round: stored version is the winner's");
	}
};

subtest 'compare-and-set loops on expect converge' => sub {
	kv({ op => 'put', ns => 'cc', key => 'list', value => [], forever => jtrue });
	my @kids = map { my $w = $_; bg(sub {
		my $tries = 0;
		for my $i (1 .. 5) {
			while (1) {
				die "too many retries\n" if ++$tries > 500;
				my $g = kv({ op => 'get', ns => 'cc', key => 'list' })->[0];
				my $r = kv({ op => 'put', ns => 'cc', key => 'list',
					value => [ @{ $g->{value} }, "$w.$i" ], forever => jtrue,
					expect => $g->{version} })->[0];
				last if $r->{applied};
			}
		}
		return 1;
	}) } 1 .. $W;
	is($_->result(180), 1, 'a writer finished') for @kids;
	my $g = kv({ op => 'get', ns => 'cc', key => 'list' })->[0];
	is(scalar @{ $g->{value} }, $W * 5, 'no append was lost');
	my %u = map { $_ => 1 } @{ $g->{value} };
	is(scalar keys %u, $W * 5, 'and none was doubled');
};

done_testing;
