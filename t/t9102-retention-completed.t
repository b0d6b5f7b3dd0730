#!/usr/bin/perl
# completedRetentionSeconds and maxWaitTimeSeconds (SPEC 9, 21). Completed retention deletes
# only segments every group holding a cursor on the partition has committed past,
# __QUEUE_MODE__ included, so a slow group never loses a message it has not read; a partition
# nobody has read keeps its messages. maxWaitTimeSeconds deletes regardless of cursors and
# leases, and applies even with retentionEnabled false.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;
use QueenRetention;

my $pg = start_pg();
my $q = start_queend(RETENTION_INTERVAL => 200);
retention_setup($q, $pg);

# Pops up to $n messages of $queue for $group and commits them; returns their offsets.
sub consume {
	my ($queue, $group, $n, %o) = @_;
	my (undef, $b) = $q->pop($queue, batch => $n, (defined $group ?
		(consumerGroup => $group, subscriptionMode => 'all') : ()), %o);
	my (undef, $r) = $q->ack_all($b) if @{ offsets($b) };
	return offsets($b);
}

subtest 'completedRetentionSeconds' => sub {
	is(($q->configure('done', retentionEnabled => jtrue, completedRetentionSeconds => 60))[0],
		200, 'configure done');
	# Segments 0-1, 2-3, 4-5, 6-7, all old enough from the start.
	$q->push_n('done', 2, partition => 'p', prefix => "d$_") for 0 .. 3;
	my $pid = partition_of('done', 'p')->{id};
	age($pid, 100, 120);

	ok(wait_rounds(3), 'three rounds ran');
	is_deeply(segments($pid), [qw(0-1 2-3 4-5 6-7)], 'nobody has read the partition: all kept');

	# Every group takes its cursor (a pop) before any commits, so that no round sees fewer.
	my %b;
	(undef, $b{fast}) = $q->pop('done', consumerGroup => 'fast', subscriptionMode => 'all',
		batch => 100);
	(undef, $b{qm}) = $q->pop('done', batch => 4);
	(undef, $b{slow}) = $q->pop('done', consumerGroup => 'slow', subscriptionMode => 'all',
		batch => 3);
	is_deeply(offsets($b{fast}), [0 .. 7], 'group fast reads 0..7');
	is_deeply(offsets($b{qm}), [0 .. 3], 'queue mode reads 0..3');
	is_deeply(offsets($b{slow}), [0 .. 2], 'group slow reads 0..2');
	for my $g (qw(fast qm slow)) {
		my (undef, $r) = $q->ack_all($b{$g});
		ok(!grep({ !$_->{success} } @$r), "$g commits what it read");
	}
	# Every group is past 0..2: segment 0-1 goes; 2-3 holds offset 3, which slow still needs.
	ok(wait_until(sub { @{ segments($pid) } == 3 }, 60, 0.1), 'one segment deleted');
	is_deeply(segments($pid), [qw(2-3 4-5 6-7)], 'only the segment every group passed');
	is(partition_of('done', 'p')->{logStart}, 2, 'logStart 2');
	ok(wait_rounds(3), 'three more rounds ran');
	is_deeply(segments($pid), [qw(2-3 4-5 6-7)], 'and nothing more while slow lags');

	is_deeply(consume('done', 'slow', 100), [3 .. 7], 'slow reads on from 3: nothing lost');
	# Now queue mode (committed 3) is the slowest.
	ok(wait_until(sub { @{ segments($pid) } == 2 }, 60, 0.1), 'the next segment goes');
	is_deeply(segments($pid), [qw(4-5 6-7)], 'queue mode holds the rest');
	is_deeply(consume('done', undef, 100), [4 .. 7], 'queue mode reads 4..7');
	ok(wait_until(sub { !@{ segments($pid) } }, 60, 0.1), 'then everything goes');
	is(partition_of('done', 'p')->{logStart}, 8, 'logStart 8, the next offset');
};

subtest 'completed retention waits for the window' => sub {
	is(($q->configure('young', retentionEnabled => jtrue,
		completedRetentionSeconds => 3600))[0], 200, 'configure young, a one-hour window');
	$q->push_n('young', 2, partition => 'p', prefix => "y$_") for 0 .. 1;
	my $pid = partition_of('young', 'p')->{id};
	is_deeply(consume('young', undef, 100), [0 .. 3], 'everything consumed');
	ok(wait_rounds(3), 'three rounds ran');
	is_deeply(segments($pid), [qw(0-1 2-3)], 'consumed but younger than the window: kept');
	age($pid, 2, 7200);
	ok(wait_until(sub { @{ segments($pid) } == 1 }, 60, 0.1), 'the aged segment goes');
	is_deeply(segments($pid), ['2-3'], 'the young one stays');
};

subtest 'maxWaitTimeSeconds deletes regardless of cursors, leases and retentionEnabled' => sub {
	is(($q->configure('mw', retentionEnabled => jfalse, maxWaitTimeSeconds => 60))[0], 200,
		'configure mw with retention disabled');
	$q->push_n('mw', 2, partition => 'p', prefix => "m$_") for 0 .. 2;
	my $pid = partition_of('mw', 'p')->{id};
	my ($s, $b) = $q->pop('mw', batch => 2, leaseSeconds => 2);
	is_deeply(offsets($b), [0, 1], 'queue mode holds a lease on 0..1, unacknowledged');
	is_deeply(consume('mw', 'never', 0 + 1), [0], 'a group committed only offset 0');
	age($pid, 4, 120);
	ok(wait_until(sub { @{ segments($pid) } == 1 }, 60, 0.1), 'two segments deleted');
	is_deeply(segments($pid), ['4-5'], 'the aged ones, read or not, leased or not');
	is(partition_of('mw', 'p')->{logStart}, 4, 'logStart 4');
	($s, $b) = $q->pop('mw', consumerGroup => 'never', batch => 10);
	is_deeply(offsets($b), [4, 5], 'the lagging group reads on from the log start');
	ok(wait_until(sub {
		my ($st, $bb) = $q->pop('mw', batch => 10);
		$b = $bb;
		return $st == 200;
	}, 30, 0.2), 'queue mode pops again once its lease lapsed');
	is_deeply(offsets($b), [4, 5], 'from the log start');
};

done_testing();
