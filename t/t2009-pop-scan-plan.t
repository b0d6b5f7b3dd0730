#!/usr/bin/perl
# A pop the broker's index cannot serve (no candidates, or none it could claim) reads the
# queue's partitions in SQL. On a database where another queue holds most partitions, a plan
# cached for any queue read them all: a sequential scan of 180,000 partitions, 48 ms, for
# every pop of a drained 10-partition queue in a full run of the bench. Those reads are now
# planned for the queues at hand, and a small queue's partitions are read through its index
# whatever the rest of the table holds. And every claim (the steady state's, first
# contact's, the slow path's) finds a candidate's cursor by partition and group: a cached
# plan read the group's cursors by group_name alone (every entry of the key's index) and
# matched them to the candidates after. The plans are read with auto_explain, generic plans
# forced (what a broker's session would cache).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

# A big queue: 20,000 partitions of one message, in pushes of 1,000.
my $stored = 0;
for my $k (0 .. 19) {
	my ($s, $b) = $q->push_items(map { +{ queue => 'sp-big', partition => 'b' . ($k * 1000 + $_),
		payload => { i => $_ } } } 1 .. 1000);
	$stored += grep { ($_->{status} // '') eq 'queued' } @{ ref $b eq 'ARRAY' ? $b : [] };
}
is($stored, 20000, 'a queue of 20,000 partitions');
my ($s) = $q->push_items(map { +{ queue => 'sp-small', partition => "s$_", payload => { i => $_ } } }
	1 .. 3);
is($s, 201, 'a queue of 3 partitions');
$pg->psql('ANALYZE queen_partitions');

my $ids = $q->partition_ids('sp-small');
my $cand = join(',', map { "'$ids->{$_}'" } qw(s1 s2 s3));

# The pop without candidates scans; the one with candidates it cannot claim (leased by the
# first) asks first whether the queue is a big one.
my @plans = $pg->plans(qq{SELECT count(*) FROM queen_pop('sp-small', NULL, NULL, NULL, 'g1', 10, 3,
		NULL, false, 'all', NULL, NULL, NULL, false);
	SELECT count(*) FROM queen_pop('sp-small', NULL, NULL, NULL, 'g1', 10, 3, NULL, false, 'all',
		NULL, NULL, ARRAY[$cand]::uuid[], true)});
my @scan = grep { /ORDER BY c\.updated_at NULLS FIRST/ && !/Query Text: SELECT count\(\*\) FROM queen_pop/ } @plans;
my @guard = grep { /LIMIT 1001/ && !/Query Text: SELECT count\(\*\) FROM queen_pop/ } @plans;
is(scalar @scan, 2, 'both pops scanned the queue');
is(scalar @guard, 1, 'the pop with candidates asked whether the queue is big');
for my $p (@scan, @guard) {
	my ($what) = $p =~ /(count\(\*\) > 1000|ORDER BY c\.updated_at)/;
	unlike($p, qr/Seq Scan on queen_partitions/, "$what: no sequential scan of the partitions");
	like($p, qr/Index (?:Only )?Scan using queen_partitions_queue_id_name_key/,
		"$what: the queue's partitions are read through its index");
}
# The claims (the steady state's, the first contact's, the slow path's) find each candidate's
# cursor by both columns of its key, never by the group alone (every entry of the index).
my @claims = grep { /WITH cl AS|WITH qs AS MATERIALIZED|v_claim \|\|/
	&& !/Query Text: SELECT count\(\*\) FROM queen_pop/ } @plans;
ok(@claims >= 2, 'the claims were planned (' . scalar(@claims) . ')');
for my $p (@claims) {
	my ($what) = $p =~ /(WITH cl AS|WITH qs AS MATERIALIZED|v_claim \|\|)/;
	my @conds = index_conds($p, 'queen_cursors_pkey');
	ok(@conds >= 1, "$what: the cursors are read through their key");
	like($_, qr/partition_id = .*group_name = /, "$what: by partition and group: $_") for @conds;
}

# First contact with candidates whose log ends the broker's index knows: the claim reads up to
# them and does not probe the segments' key for each candidate's tail (a heap fetch each on
# segments not yet vacuumed); without them it probes. The group has met the queue (its first
# pop through the broker stored its start), so the claim is queen_pop's first statement.
my (undef, $first) = $q->pop('sp-big', batch => 1, consumerGroup => 'g3', subscriptionMode => 'all');
is(scalar @{ ref $first eq 'HASH' ? $first->{messages} // [] : [] }, 1, 'g3 met the big queue');
my $big = $q->partition_ids('sp-big');
my $taken = ref $first eq 'HASH' && $first->{messages}[0] ? $first->{messages}[0]{partition} : '';
my @fresh = grep { $_ ne $taken } map { "b$_" } 101 .. 141;
my $with = join(',', map { "'$big->{$_}'" } @fresh[0 .. 19]);
my $without = join(',', map { "'$big->{$_}'" } @fresh[20 .. 39]);
my $zeros = join(',', (0) x 20);
my @known = $pg->plans(qq{SELECT count(*) FROM queen_pop('sp-big', NULL, NULL, NULL, 'g3', 100, 20,
		NULL, false, 'all', NULL, NULL, ARRAY[$with]::uuid[], false, ARRAY[$zeros]::bigint[]);
	SELECT count(*) FROM queen_pop('sp-big', NULL, NULL, NULL, 'g3', 100, 20, NULL, false, 'all',
		NULL, NULL, ARRAY[$without]::uuid[], false)});
my @tails = map { tail_probe($_) } grep { /WITH qs AS MATERIALIZED/
	&& !/Query Text: SELECT count\(\*\) FROM queen_pop/ } @known;
is(scalar @tails, 2, 'both claims were planned');
like($tails[0] // '', qr/never executed/, 'known log ends: no probe of the tails');
like($tails[1] // '', qr/loops=20\)/, 'unknown log ends: a probe per candidate');
my $rows = $pg->psql(qq{SELECT count(*) FROM queen_cursors c JOIN queen_partitions p
	ON p.id = c.partition_id WHERE c.group_name = 'g3' AND c.batch_end = 0
	AND p.name IN (} . join(',', map { "'$_'" } @fresh[0 .. 39]) . ')');
is($rows, 40, 'each claimed partition leased to its one message, no further');

# The steady state's claim (cursors that exist, queen_pop_held) does the same with the log
# ends. Those 40 leases lapse, and each cursor is claimed again.
$pg->psql(q{UPDATE queen_cursors SET lease_expires_at = now() - interval '1 second'
	WHERE group_name = 'g3'});
my @held = $pg->plans(qq{SELECT count(*) FROM queen_pop_held('sp-big', NULL, 'g3', 100, 20,
		NULL, false, gen_random_uuid(), ARRAY[$with]::uuid[], ARRAY[$zeros]::bigint[]);
	SELECT count(*) FROM queen_pop_held('sp-big', NULL, 'g3', 100, 20, NULL, false,
		gen_random_uuid(), ARRAY[$without]::uuid[])});
my @held_tails = map { tail_probe($_) } grep { /WITH cl AS/
	&& !/Query Text: SELECT count\(\*\) FROM queen_pop_held/ } @held;
is(scalar @held_tails, 2, 'both steady-state claims were planned');
like($held_tails[0] // '', qr/never executed/, 'steady state, known log ends: no probe');
like($held_tails[1] // '', qr/loops=20\)/, 'steady state, unknown log ends: a probe each');
$rows = $pg->psql(q{SELECT count(*) FROM queen_cursors WHERE group_name = 'g3'
	AND lease_expires_at > now() AND batch_end = 0 AND attempt_count = 2});
is($rows, 40, 'each cursor claimed again, its one message a second time');

# What the scans found is what a pop delivers.
my %got;
for (1 .. 3) {
	my (undef, $b) = $q->pop('sp-small', batch => 10, consumerGroup => 'g2',
		subscriptionMode => 'all');
	$got{ $_->{data}{i} }++ for @{ ref $b eq 'HASH' ? $b->{messages} // [] : [] };
}
is_deeply(\%got, { 1 => 1, 2 => 1, 3 => 1 }, "another group's pops get each partition's message once");

$q->stop;
done_testing();

# The scan of the segments' key under the claim's log-tail branch (the one whose one-time
# filter is the tail's being unknown), from a plan's text.
sub tail_probe {
	my ($plan) = @_;
	my $after;
	for my $line (split /\n/, $plan) {
		$after = 1 if $line =~ /One-Time Filter: \(\(u\.kend IS NULL\)/;
		return $line if $after && $line =~ /Scan Backward using queen_segments_pkey/;
	}
	return undef;
}
