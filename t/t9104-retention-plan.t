#!/usr/bin/perl
# A retention round reads the partitions of the queues that have a rule, through each queue's
# index, whatever the planner believes about how many queues have one. As a join of the
# queues with queen_partitions, a plan that expected most queues to have a rule read every
# partition of the database and kept those of the queues with one: 1.8-2.9 s a round in a
# full run of contrib/bench.sh (182,000 partitions, one queue with a rule). The plan is read
# with auto_explain.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend(RETENTION_INTERVAL => 3600000);

# Many queues, one partition each, and one queue of 5,000 partitions: none with a rule.
my ($s) = $q->push_items(map { +{ queue => "rq$_", partition => 'p', payload => { i => $_ } } } 1 .. 60);
is($s, 201, '60 queues of one partition');
for my $k (0 .. 4) {
	($s) = $q->push_items(map { +{ queue => 'rq-big', partition => 'b' . ($k * 1000 + $_),
		payload => { i => $_ } } } 1 .. 1000);
	is($s, 201, "rq-big: partitions $k thousand to " . ($k + 1) . ' thousand');
}
# The one queue with a rule.
is(($q->configure('rq-ret', retentionEnabled => jtrue, retentionSeconds => 60))[0], 200,
	'rq-ret has retentionSeconds');
($s) = $q->push_items(map { +{ queue => 'rq-ret', partition => "r$_", payload => { i => $_ } } } 1 .. 3);
is($s, 201, 'rq-ret: 3 partitions');

my @plans = grep { /AS t_any/ && !/Query Text: SELECT queen_retention_round/ }
	$pg->plans('SELECT queen_retention_round(1000)');
is(scalar @plans, 1, "the round's plan of its candidates was logged");
for my $p (@plans) {
	unlike($p, qr/Seq Scan on queen_partitions/, 'no sequential scan of the partitions');
	my @conds = map { index_conds($p, $_) } qw(queen_partitions_queue_id_name_key queen_partitions_pkey);
	ok(@conds >= 1, 'the partitions are read through an index');
	like($_, qr/^\(queue_id = /, 'keyed by the queue') for @conds;
	like($p, qr/actual rows=3 loops=1\)\n\s+Index Cond: \(queue_id = /,
		'three partitions read, those of the queue with a rule');
}

$q->stop;
done_testing();
