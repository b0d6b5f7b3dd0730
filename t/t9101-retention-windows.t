#!/usr/bin/perl
# Retention by age (SPEC 9): with retentionEnabled and retentionSeconds, segments older than
# the window go, consumed or not, whole segments only; the partition's log start moves to the
# first segment kept, and a group whose cursor fell below it reads on from there; offsets are
# never reused; dead letters survive; a queue without retentionEnabled keeps everything.
# Segments are aged by moving their created_at back through psql (the API cannot).
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

# Four pushes of three messages: segments 0-2, 3-5, 6-8, 9-11.
for my $queue (qw(ret keep)) {
	is(($q->configure($queue, retentionEnabled => $queue eq 'ret' ? jtrue : jfalse,
		retentionSeconds => 60))[0], 200, "configure $queue");
	$q->push_n($queue, 3, partition => 'p', prefix => "$queue-$_") for 0 .. 3;
}
my $pid = partition_of('ret', 'p')->{id};
my $keep = partition_of('keep', 'p')->{id};
ok($pid && $keep, 'partition ids') or BAIL_OUT('no partition');
is_deeply(segments($pid), [qw(0-2 3-5 6-8 9-11)], 'four pushes made four segments');

subtest 'before: a dead letter and a group that read the first message' => sub {
	my (undef, $b) = $q->pop('ret', partition => 'p', batch => 1);
	is_deeply(offsets($b), [0], 'queue mode pops offset 0');
	my (undef, $r) = $q->ack_all($b, 'dlq');
	is_true($r->[0]{dlq}, 'and dead-letters it');
	(undef, $b) = $q->pop('ret', consumerGroup => 'slow', subscriptionMode => 'all',
		batch => 1);
	is_deeply(offsets($b), [0], 'group slow pops offset 0');
	(undef, $r) = $q->ack_all($b);
	is_true($r->[0]{success}, 'and commits it');
};

subtest 'nothing is young enough to go yet' => sub {
	ok(wait_rounds(3), 'three rounds ran');
	is_deeply(segments($pid), [qw(0-2 3-5 6-8 9-11)], 'all four segments are kept');
	is(partition_of('ret', 'p')->{logStart}, 0, 'logStart 0');
};

subtest 'segments past retentionSeconds go, whole' => sub {
	age($pid, 6, 120);
	age($keep, 6, 120);
	ok(wait_until(sub { @{ segments($pid) } == 2 }, 60, 0.1), 'two segments deleted');
	is_deeply(segments($pid), [qw(6-8 9-11)], 'exactly the two aged ones, the rest untouched');
	my $p = partition_of('ret', 'p');
	is($p->{logStart}, 6, 'logStart moved to the first segment kept');
	is($p->{messages}, 6, '6 messages retained');
	is($p->{logEnd}, 11, 'logEnd unchanged');
};

subtest 'consumers read on from the log start' => sub {
	my ($s, $b) = $q->pop('ret', consumerGroup => 'slow', batch => 2);
	is($s, 200, 'group slow (committed 0, below the log start) gets messages');
	is_deeply(offsets($b), [6, 7], 'starting at the log start');
	($s, $b) = $q->pop('ret', batch => 100);
	is_deeply(offsets($b), [6 .. 11], 'queue mode too');
	($s, $b) = $q->pop('ret', consumerGroup => 'fresh', subscriptionMode => 'all',
		batch => 100);
	is_deeply(offsets($b), [6 .. 11], 'a new group with mode all starts at the log start');
	my (undef, $r) = $q->push_items({ queue => 'ret', partition => 'p',
		transactionId => 'after' });
	is($r->[0]{status}, 'queued', 'push after retention');
	(undef, $b) = $q->pop('ret', consumerGroup => 'other', subscriptionMode => 'all',
		batch => 100);
	is_deeply(offsets($b), [6 .. 12], 'offsets are never reused: the new message is 12');
};

subtest 'dead letters survive retention' => sub {
	my (undef, $d) = $q->get('/api/v1/dlq', { queue => 'ret' });
	is($d->{total}, 1, 'the dead letter is still listed');
	is($d->{messages}[0]{transactionId}, 'ret-0-0', 'with its transactionId');
	is_deeply($d->{messages}[0]{data}, { i => 0 }, 'and its payload');
};

subtest 'retentionEnabled false keeps everything (retentionSeconds alone does nothing)' => sub {
	ok(wait_rounds(3), 'three more rounds ran');
	is_deeply(segments($keep), [qw(0-2 3-5 6-8 9-11)], 'keep has its four segments');
	is(partition_of('keep', 'p')->{logStart}, 0, 'logStart 0');
	my (undef, $b) = $q->pop('keep', batch => 100);
	is_deeply(offsets($b), [0 .. 11], 'every message is delivered');
};

subtest 'the whole log can go; pushes go on from the end' => sub {
	age($pid, 100, 600);
	ok(wait_until(sub { !@{ segments($pid) } }, 60, 0.1), 'every segment deleted');
	my $p = partition_of('ret', 'p');
	is($p->{logStart}, 13, 'logStart is the next offset');
	is($p->{messages}, 0, 'no message retained');
	is($p->{logEnd}, 12, 'logEnd kept with no segment left to read it from');
	like($p->{lastMessageAt} // '', iso_re, 'and lastMessageAt');
	my ($s) = $q->pop('ret', consumerGroup => 'late', subscriptionMode => 'all', batch => 10);
	is($s, 204, 'a new group finds nothing to pop');
	(undef, my $r) = $q->push_items({ queue => 'ret', partition => 'p',
		transactionId => 'new' });
	is($r->[0]{status}, 'queued', 'push to the emptied partition');
	($s, my $b) = $q->pop('ret', consumerGroup => 'late', batch => 10);
	is_deeply(offsets($b), [13], 'the next push is offset 13 and the group gets it');
};

subtest 'status counts what retention did' => sub {
	my ($s, $st) = $q->get('/api/v1/status');
	is($s, 200, 'GET /api/v1/status');
	cmp_ok($st->{retention}{segmentsDeleted}, '>=', 5, 'segmentsDeleted >= 5');
	is($st->{retention}{intervalMs}, 200, 'intervalMs is RETENTION_INTERVAL');
	like($st->{retention}{lastRunAt} // '', iso_re, 'lastRunAt');
};

done_testing();
