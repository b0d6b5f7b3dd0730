#!/usr/bin/perl
# queen_cursors keeps small planner statistics (schema/025): the broker analyses the table at
# every doubling of its rows (queen_stats_refresh), and at the default target each ANALYZE
# sampled 30,000 rows and built statistics of every column from them, a third of a second of
# the database's CPU beside the pops that were writing the cursors. What the plans need of
# it, its row count and its groups, an ANALYZE at target 10 still gives.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

my $targets = $pg->psql("SELECT string_agg(DISTINCT attstattarget::text, ',') FROM pg_attribute " .
	"WHERE attrelid = 'queen_cursors'::regclass AND attnum > 0 AND NOT attisdropped");
is($targets, '10', 'every column of queen_cursors has statistics target 10');

# 6,000 partitions of one message each, read by group g1 with autopilot: a cursor each.
for (my $i = 0; $i < 6000; $i += 1000) {
	my ($s, $b) = $q->push_items(map { +{ queue => 'cst', partition => "p$_",
		payload => { i => $_ } } } $i + 1 .. $i + 1000);
	die "push: $s\n" unless $s == 201 && !grep { $_->{status} ne 'queued' } @$b;
}
my $got = 0;
for (1 .. 400) {
	my ($s, $b) = $q->pop('cst', consumerGroup => 'g1', batch => 100, autopilot => 'true',
		subscriptionMode => 'all');
	last unless $s == 200;
	$got += @{ $b->{messages} };
	$q->ack_all($b);
}
is($got, 6000, 'group g1 read the 6,000 partitions');

my $analyzed = wait_until(sub {
	$pg->psql("SELECT coalesce(analyze_count, 0) FROM pg_stat_user_tables " .
		"WHERE relname = 'queen_cursors'") > 0 }, 10);
ok($analyzed, 'the broker analysed queen_cursors as it grew');

$pg->psql('ANALYZE queen_cursors');
my ($rows, $est) = split /\|/, $pg->psql("SELECT (SELECT count(*) FROM queen_cursors), " .
	"reltuples::bigint FROM pg_class WHERE oid = 'queen_cursors'::regclass");
ok(abs($est - $rows) <= $rows / 10, "the planner's row count ($est) is the table's ($rows)");
my $mcv = $pg->psql("SELECT most_common_vals::text FROM pg_stats " .
	"WHERE tablename = 'queen_cursors' AND attname = 'group_name'");
like($mcv // '', qr/\bg1\b/, 'and its statistics name the group that holds the cursors');
my $hist = $pg->psql("SELECT coalesce(array_length(histogram_bounds, 1), 0) FROM pg_stats " .
	"WHERE tablename = 'queen_cursors' AND attname = 'partition_id'");
ok($hist > 0 && $hist <= 11, "partition_id's histogram has at most 11 bounds ($hist)");

done_testing();
