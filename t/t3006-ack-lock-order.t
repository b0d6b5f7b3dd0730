#!/usr/bin/perl
# An ack locks every cursor it commits before it writes any of them (SPEC 6, 8: acks and pops
# of one group never wait for each other in a cycle). A pop whose snapshot is older than a
# cursor row inserts that cursor too (ON CONFLICT DO NOTHING): had an ack already written the
# row and then waited for a row the pop holds, each would wait for the other, and PostgreSQL
# would cancel the ack as a deadlock (a 503, its lease left to run out). Here a transaction
# holds the second cursor of a lease, as a pop holds the rows it claims; while the ack waits
# for it, inserting the first cursor must not wait for the ack.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

subtest 'an ack waiting for a cursor has written none of the others' => sub {
	$q->push_n('lo', 1, partition => $_, prefix => "lo-$_") for qw(a b);
	my ($s, $b) = $q->pop('lo', partitions => 2, batch => 10, consumerGroup => 'g',
		subscriptionMode => 'all');
	is($s, 200, 'one pop over both partitions');
	is($b->{partitionsClaimed}, 2, 'two partitions under one lease');
	my ($first, $second) = sort map { $_->{partitionId} } @{ $b->{messages} };

	# A pop's hold on the second cursor, for 3 s.
	my $holder = bg(sub {
		return $pg->psql("BEGIN; SELECT 1 FROM queen_cursors WHERE partition_id = " .
			"'$second' AND group_name = 'g' FOR UPDATE; SELECT pg_sleep(3); COMMIT");
	});
	sleep 0.5;
	my $t0 = time;
	my $ack = bg(sub { my ($as, $ab) = $q->ack_all($b); return [ $as, $ab ] });
	ok(wait_until(sub {
		$pg->psql("SELECT count(*) FROM pg_locks WHERE NOT granted AND " .
			  "locktype = 'transactionid'") > 0 }, 5), 'the ack waits for the held cursor');

	# The pop's side: its insert of the first cursor finds the row and leaves it, at once.
	my $ins = $pg->psql("SET lock_timeout = '1s'; INSERT INTO queen_cursors " .
		"(partition_id, group_name) VALUES ('$first', 'g') ON CONFLICT DO NOTHING; " .
		"SELECT 'not blocked'");
	is($ins, 'not blocked', 'the insert did not wait for the ack (lock_timeout 1 s)');
	ok(time - $t0 < 2.5, 'and the ack was still waiting then');

	my $r = $ack->result(15);
	is(ref $r eq 'ARRAY' && $r->[0], 200, 'the ack completes once the hold ends')
		or diag(to_json($r));
	is(scalar(grep { $_->{success} } @{ ref $r eq 'ARRAY' ? $r->[1] : [] }), 2,
		'both messages acked');
	$holder->result(10);
	my ($ps) = $q->pop('lo', consumerGroup => 'g');
	is($ps, 204, 'nothing left for the group');
};

done_testing;
