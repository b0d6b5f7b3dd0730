#!/usr/bin/perl
# The partition index is loaded at start-up, and reloaded, in chunks of 5,000 rows of the
# snapshot (issue 7, a million partitions in the broker's memory): every partition and every
# group's cursor comes through whatever the chunk boundaries, 10,000 rows (two whole chunks,
# the FETCH after them empty) as well as 12,345. A broker started on that database knows them
# all before it answers, and serves pops of every partition and group from them; it loads
# them once. The log ends come from a probe of each partition's newest segment, or, where
# that reads fewer pages (segments VACUUM has not been through, few a partition), from one
# scan of the segments: the broker learns the same ends either way.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $A = start_queend();
# As just after a fill: no segment all-visible until the VACUUM below; and the statistics
# the start-up load's choice reads change only when this test says.
$pg->psql("ALTER TABLE $_ SET (autovacuum_enabled = off)") for qw(queen_segments queen_partitions);

sub index_of {
	my ($q) = @_;
	my ($s, $m) = $q->get('/metrics');
	return ref $m eq 'HASH' && ref $m->{index} eq 'HASH' ? $m->{index} : {};
}
# $n partitions of $queue, one message each, in pushes of 1,000.
sub fill {
	my ($q, $queue, $n) = @_;
	for (my $i = 0; $i < $n; $i += 1000) {
		my $top = $i + 1000 < $n ? $i + 1000 : $n;
		my ($s, $b) = $q->push_items(map { +{ queue => $queue, partition => "p$_",
			payload => { i => $_ } } } $i + 1 .. $top);
		die "push to $queue: $s\n" unless $s == 201 && !grep { $_->{status} ne 'queued' } @$b;
	}
}
# Pops with autopilot and acks until the group has nothing left or has $most; returns how
# many it got.
sub drain {
	my ($q, $queue, $group, $most) = @_;
	my $got = 0;
	while ($got < $most) {
		my ($s, $b) = $q->pop($queue, consumerGroup => $group,
			batch => $most - $got < 100 ? $most - $got : 100, autopilot => 'true',
			subscriptionMode => 'all');
		last unless $s == 200;
		$got += @{ $b->{messages} };
		$q->ack_all($b);
	}
	return $got;
}

fill($A, 'load-even', 10000);
is($A->stop, 0, 'a broker pushed 10,000 partitions, one message each, and stopped');

# The two halves of a read cut at any page, past the end included, hold every row once.
my $all = $pg->psql('SELECT count(*), count(DISTINCT partition_id) FROM queen_snapshot_partitions()');
is($all, '10000|10000', 'the whole snapshot holds every partition once');
for my $cut (0, 1, 37, $pg->psql("SELECT queen_pages('queen_partitions')"), 1000000) {
	is($pg->psql('SELECT count(*), count(DISTINCT partition_id) FROM ' .
		"(SELECT * FROM queen_snapshot_partitions(0, $cut) UNION ALL " .
		"SELECT * FROM queen_snapshot_partitions($cut, NULL)) h"), '10000|10000',
		"halves cut at page $cut hold them all, once");
}

# The log ends two ways.
is($pg->psql('SELECT count(*) FROM queen_snapshot_partitions_kept() WHERE log_end = -1'),
	10000, 'without the probes a partition row holds no log end (retention kept none)');
is($pg->psql(q{SELECT count(*) FROM queen_snapshot_partitions() p
	JOIN (SELECT partition_id, max(end_offset) AS e FROM queen_snapshot_segment_ends()
	      GROUP BY 1) s USING (partition_id) WHERE s.e = p.log_end}), 10000,
	"the greatest segment end of each partition is the log end its probe finds");
is($pg->psql('SELECT queen_snapshot_scans_segments()'), 't',
	'one segment a partition, none all-visible: a scan of them reads fewer pages than the probes');

# Messages the index knows a queue has stored: the sum of its partitions' log ends.
sub stored {
	my ($q, $queue) = @_;
	my ($s, undef, undef, $text) = $q->get('/metrics/prometheus');
	return $text =~ /^queen_queue_messages_stored_total\{queue="\Q$queue\E"\} (\d+)$/m ? $1 : -1;
}

# The snapshot's 10,000 rows are two whole chunks: the FETCH after them comes back empty.
# No timed reload in this test's time (the start-up load is the one looked for below).
my $B = start_queend(LOG_LEVEL => 'debug', QUEEN_INDEX_RESYNC_MS => 600000);
my $ix = index_of($B);
is($ix->{partitions}, 10000, 'a broker started on the database holds all 10,000');
is($B->log_count(qr/index sweep: .*log ends by a scan of the segments/), 1,
	'their log ends read in a scan of the segments');
is(stored($B, 'load-even'), 10000, "every partition's log end is known: 10,000 messages stored");
my ($s, $b) = $B->pop('load-even', partition => 'p10000', batch => 10);
is($s, 200, 'and serves the last of them');
is_deeply([ map { $_->{data}{i} } @{ $b->{messages} } ], [10000], 'with its message');
# The load at start-up listens for pushes first, and the maintenance thread goes on from it:
# the index is loaded once, not a second time as soon as the broker answers (for a million
# partitions that second load was seconds of the database's time and the broker's, beside
# the first consumers).
sleep 1.5;
is($B->log_count(qr/index sweep:/), 1, 'the broker loaded its index once at start-up, not again once ready');
# Read in parts, side by side on two connections sharing a snapshot.
is($B->log_count(qr/index sweep: \d+ us, read on 2 connections/), 1,
	'in parts, on two connections side by side');

fill($B, 'load-odd', 2345);
is(drain($B, 'load-odd', 'g1', 1000), 1000, 'group g1 reads 1,000 partitions of another queue');
is($B->stop, 0, 'the broker stops');

# The reloads beside the traffic probe: the index knows the log ends already, and a scan
# would read every segment again at each.
my $R = start_queend(LOG_LEVEL => 'debug', QUEEN_INDEX_RESYNC_MS => 200);
ok(wait_until(sub { $R->log_count(qr/index sweep:/) >= 2 }, 30), 'a broker reloads its index');
my @sweeps = QueenTest::_slurp($R->{log}) =~ /index sweep: .*?log ends by ([a-z ]+),/g;
is_deeply([ @sweeps[0, 1] ], [ 'a scan of the segments', 'probes' ],
	'its start-up load scans the segments, its first reload probes');
is($R->stop, 0, 'and stops');

# The rule, on its own: a scan when the segments' pages are fewer than the partitions times
# the share of pages not all-visible.
is(join(',', map { $pg->psql("SELECT queen_scan_reads_less($_)") }
	'1000, 0, 1000000', '1000, 1000, 1000000', '1000, 990, 1000000', '100000, 0, 10',
	'0, 0, 10'), 't,f,t,f,f',
	'a scan for few pages over many partitions until VACUUM marks nearly all all-visible; ' .
	'never for long logs over few partitions, or no segments');

# 12,345 partitions, 1,000 of them with a cursor: two whole chunks and a part. After a
# VACUUM the next broker reads the log ends as the rule then says (pages that bulk
# extension added and nothing wrote VACUUM leaves not all-visible, so the answer may be
# either) and learns the same ends.
$pg->psql('VACUUM queen_segments');
my $way = $pg->psql('SELECT queen_snapshot_scans_segments()') eq 't'
	? 'a scan of the segments' : 'probes';
my $C = start_queend(LOG_LEVEL => 'debug');
is($C->log_count(qr/index sweep: .*log ends by \Q$way\E,/), 1, "the next broker reads them by $way");
is(stored($C, 'load-even') . '/' . stored($C, 'load-odd'), '10000/2345',
	'and knows the same log ends');
$ix = index_of($C);
is($ix->{queues}, 2, 'the next broker holds both queues');
is($ix->{partitions}, 12345, 'all 12,345 partitions');
is($ix->{groupSlots}, 1001, "the 1,000 cursors of g1, and queue mode's on the one it popped");
is(drain($C, 'load-odd', 'g1', 5000), 1345, 'g1 goes on where it was: the 1,345 it had not read');

# A cursor below its partition's log start counts as at it. Six partitions of four messages
# (offsets 0-3, a segment each); g2 acks offset 0 of each; then the first three segments go
# as retention deletes them, so that each partition holds one message for g2. A broker that
# loaded g2's cursors as they are stored would see three messages left on each, and
# autopilot would claim two partitions for a batch of six.
for my $round (0 .. 3) {
	my ($s) = $C->push_items(map { +{ queue => 'load-start', partition => "s$_",
		payload => { i => $round } } } 1 .. 6);
	die "push to load-start: $s\n" unless $s == 201;
}
for my $i (1 .. 6) {
	my ($s, $b) = $C->pop('load-start', partition => "s$i", consumerGroup => 'g2', batch => 1,
		subscriptionMode => 'all');
	die "pop of s$i: $s\n" unless $s == 200;
	$C->ack_all($b);
}
is($C->stop, 0, 'g2 acked the first message of six partitions; the broker stops');
$pg->psql(q{DELETE FROM queen_segments s USING queen_partitions p, queen_queues q
	WHERE s.partition_id = p.id AND p.queue_id = q.id AND q.name = 'load-start'
	  AND s.end_offset <= 2});
$pg->psql(q{UPDATE queen_partitions p SET log_start = 3 FROM queen_queues q
	WHERE p.queue_id = q.id AND q.name = 'load-start'});
my $D = start_queend();
($s, $b) = $D->pop('load-start', consumerGroup => 'g2', batch => 6, autopilot => 'true');
is($s, 200, 'a broker started then pops for g2');
is_deeply([ map { $_->{data}{i} } @{ $b->{messages} } ], [ (3) x 6 ],
	'the one message left on each of the six partitions, in one pop');

done_testing();
