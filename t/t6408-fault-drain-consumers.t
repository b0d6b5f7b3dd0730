#!/usr/bin/perl
# While the spool drains (SPEC 15), the workers run one consumer's request (a pop, an ack) at
# a time, so that the replay of what was spooled gets the cores: after an outage under load
# the consumers had taken about half of them, and the spool emptied 1.5x slower. Other
# requests are not held. Here the replay waits on a partition row another session holds, as
# does an ack on its cursor row: a pop of another queue waits for the ack; with the spool
# empty, the same pop is answered beside the waiting ack.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

sub pending { my (undef, $b) = $q->get('/api/v1/status/buffers'); ($b // {})->{pendingCount} }

sub maintenance {
	my ($on) = @_;
	my ($s) = $q->post_json('/api/v1/system/maintenance', { enabled => $on ? jtrue : jfalse });
	is($s, 200, 'maintenance ' . ($on ? 'on' : 'off'));
}

# Seconds a pop of $queue (wait=false) took to be answered, or -1 when it took over $limit.
sub pop_took {
	my ($queue, $limit) = @_;
	my $t = time;
	my $pop = bg(sub { my ($s, $b) = $q->pop($queue, wait => 'false'); [ $s, $b ] });
	return (wait_until(sub { $pop->done }, $limit, 0.02) ? time - $t : -1, $pop);
}

# A session that holds the cursor of queue `work` (queue mode) and, when $spooled, the
# partition row of queue `spooled`, for $secs seconds; returns once it holds them.
sub hold_rows {
	my ($secs, $spooled) = @_;
	my $rows = "SELECT 1 FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id " .
		"JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = 'work' FOR UPDATE OF c; ";
	$rows .= "SELECT 1 FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id " .
		"WHERE q.name = 'spooled' FOR UPDATE OF p; " if $spooled;
	my $holder = bg(sub { $pg->psql("BEGIN; ${rows}SELECT pg_sleep($secs); COMMIT"); 1 });
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity WHERE query " .
		"LIKE '%pg_sleep($secs)%' AND state = 'active' AND pid <> pg_backend_pid()") eq '1' },
		10, 0.02), 'another session holds the rows');
	return $holder;
}

# A message of `work` popped (before its cursor is held: a pop skips a locked cursor).
sub popped_work {
	my ($s, $b) = $q->pop('work', wait => 'false', batch => 1);
	is($s, 200, 'a message of work popped');
	return $b;
}

# The ack of $popped, sent in the background; returns once it waits for the held cursor.
sub blocked_ack {
	my ($popped) = @_;
	my $ack = bg(sub { my ($as) = $q->ack_all($popped); $as });
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity WHERE " .
		"wait_event_type = 'Lock' AND query LIKE '%queen_ack%'") eq '1' }, 10, 0.02),
		'the ack waits for the held cursor');
	return $ack;
}

$q->push_n("other$_", 1, prefix => "o$_") for 1 .. 3;
$q->push_n('spooled', 1, prefix => 'seed');
$q->push_n('work', 4, prefix => 'w');
my ($s, $b) = $q->pop('work', wait => 'false', batch => 1);
is($s, 200, 'work has a cursor');
is(($q->ack_all($b))[0], 200, 'and its first message is acked');

subtest 'the spool empty: a pop is answered beside an ack that waits' => sub {
	my $popped = popped_work();
	my $holder = hold_rows(3, 0);
	my $ack = blocked_ack($popped);
	my ($took, $pop) = pop_took('other1', 2);
	ok($took >= 0, "the pop is answered while the ack waits ($took s)");
	is($pop->result(5)->[0], 200, 'with a message');
	is($ack->result(30), 200, 'the ack is answered once the cursor is free');
	$holder->result(30);
};

subtest 'the spool draining: a pop waits for the ack before it' => sub {
	my $popped = popped_work();
	maintenance(1);
	my ($ps, $pb) = $q->push_items(map { +{ queue => 'spooled', payload => { i => $_ } } } 1 .. 3);
	is($ps, 201, 'three items pushed in maintenance mode');
	is_deeply([ map { $_->{status} } @$pb ], [ ('buffered') x 3 ], 'buffered');
	my $holder = hold_rows(6, 1);
	maintenance(0);
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity WHERE " .
		"wait_event_type = 'Lock' AND query LIKE '%queen_push%'") eq '1' }, 10, 0.02),
		'the replay waits for the held partition');
	is(pending(), 3, 'the spool holds the three items');
	my $ack = blocked_ack($popped);
	my ($took, $pop) = pop_took('other2', 1.5);
	is($took, -1, 'the pop is not answered while the ack waits');
	my ($hs) = $q->get('/health');
	is($hs, 200, '/health is answered meanwhile');
	is($ack->result(30), 200, 'the ack is answered once the rows are free');
	is($pop->result(30)->[0], 200, 'then the pop, with a message');
	$holder->result(30);
	ok(wait_until(sub { pending() == 0 }, 30, 0.05), 'the spool drains');
	is($pg->psql("SELECT sum(cardinality(s.ids)) FROM queen_segments s JOIN queen_partitions p " .
		"ON p.id = s.partition_id JOIN queen_queues q ON q.id = p.queue_id " .
		"WHERE q.name = 'spooled'"), 4, 'every spooled item stored once');
	$popped = popped_work();
	my $holder2 = hold_rows(3, 0);
	$ack = blocked_ack($popped);
	my ($took2, $pop2) = pop_took('other3', 2);
	ok($took2 >= 0, "drained: a pop is answered beside a waiting ack again ($took2 s)");
	is($pop2->result(5)->[0], 200, 'with a message');
	is($ack->result(30), 200, 'the ack too, once the cursor is free');
	$holder2->result(30);
};

done_testing();
