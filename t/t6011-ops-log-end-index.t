#!/usr/bin/perl
# The log end of a partition comes from its newest segment (queen_log_tail), and the primary
# key of queen_segments carries that segment's end_offset and created_at (schema/024): once
# VACUUM has marked the heap all-visible, the probe reads the index alone, not the segment's
# row with its payloads. A broker loading its index at start-up makes one such probe per
# partition. The log ends it learns that way are the right ones.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

my $key = $pg->psql("SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM pg_index i " .
	"CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(att, n) " .
	"JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att " .
	"WHERE i.indexrelid = 'queen_segments_pkey'::regclass");
is($key, 'partition_id,base_offset,end_offset,created_at', 'the key carries the log end');
is($pg->psql("SELECT indnkeyatts FROM pg_index " .
	"WHERE indexrelid = 'queen_segments_pkey'::regclass"), 2,
	'as included columns: the key itself is still (partition_id, base_offset)');

# Three partitions of 5, 10 and 15 messages, in several segments each.
for my $round (1 .. 5) {
	my ($s) = $q->push_items(map { +{ queue => 'le', partition => "p$_",
		payload => { round => $round, pad => 'x' x 300 } } } map { ($_) x $_ } 1 .. 3);
	is($s, 201, "push $round stored");
}
my $ids = $q->partition_ids('le');
# The broker's own transactions (a resync's snapshot) may hold VACUUM back for a moment.
my $plan;
wait_until(sub {
	$pg->psql('VACUUM queen_segments');
	$plan = $pg->psql("SET enable_seqscan = off; SET enable_bitmapscan = off; " .
		"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT pl.* " .
		"FROM queen_partitions p CROSS JOIN LATERAL queen_log_tail(p.id, " .
		"p.kept_next_offset, p.kept_last_created_at) pl WHERE p.id = '$ids->{p2}'");
	return $plan =~ /Heap Fetches: 0/;
}, 10);
like($plan, qr/Index Only Scan Backward using queen_segments_pkey/,
	'the log end of a vacuumed partition is probed in the index alone') or diag($plan);
like($plan, qr/Heap Fetches: 0/, 'without fetching the segment') or diag($plan);

# A broker started now loads these log ends into its index and serves every message.
$q->stop;
$q = start_queend();
my %ends = map { split /\|/ } split /\n/, $pg->psql("SELECT s.partition_name, s.log_end " .
	"FROM queen_snapshot_partitions() s JOIN queen_queues q ON q.id = s.queue_id " .
	"WHERE q.name = 'le'");
is_deeply(\%ends, { p1 => 4, p2 => 9, p3 => 14 }, 'the snapshot gives each log end');
my ($s, $b) = $q->pop('le', batch => 100, autopilot => 'true', autoAck => 'true');
is($s, 200, 'a restarted broker pops the queue');
is(scalar @{ $b->{messages} // [] }, 30, 'every message, found through its index')
	or diag(explain($b));

done_testing();
