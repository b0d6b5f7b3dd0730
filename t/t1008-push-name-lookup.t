#!/usr/bin/perl
# A push that names partitions the broker has no id for looks each name up by both columns of
# the unique index (queue_id, name), whatever the planner believed about the table's size
# when it cached the plan. Planned while the table held a handful of rows, the lookup was an
# index scan on queue_id alone with the name as a join filter: every name a scan of all its
# queue's partitions, kept for as long as the cached plan lived (13,900 buffer hits a call in
# the bench's prefill of 10,000 partitions, a tenth of its database time). The spool's replay
# looks names up the same way. The plans are read with auto_explain, generic plans forced.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

# A few small queues: the planner sees a tiny table, a few rows per queue.
for my $k (1 .. 3) {
	my ($s) = $q->push_items(map { +{ queue => "nl$k", partition => "p$_", payload => { i => $_ } } }
		1 .. 4);
	is($s, 201, "queue nl$k: 4 partitions created");
}

# Every plan that reads queen_partitions by name: each read is keyed by queue and name.
sub keyed_lookups {
	my ($what, $call, $marker) = @_;
	my @plans = grep { /$marker/ } $pg->plans($call);
	ok(@plans >= 1, "$what: the plan of the lookup was logged") or return;
	for my $p (@plans) {
		unlike($p, qr/Seq Scan on queen_partitions/, "$what: no sequential scan of the partitions");
		my @conds = index_conds($p, 'queen_partitions_queue_id_name_key');
		ok(@conds >= 1, "$what: the partitions are read through (queue_id, name)");
		like($_, qr/queue_id = .*name = /, "$what: by both columns: $_") for @conds;
	}
}

keyed_lookups('a push of new names',
	q{SELECT cardinality(queen_resolve_partitions(array_fill(NULL::uuid, ARRAY[3]),
		ARRAY['nl1', 'nl1', 'nl2'], ARRAY['p1', 'fresh-1', 'fresh-2']))},
	qr/r AS MATERIALIZED/);

keyed_lookups('a replay of items with transactionIds',
	q{SELECT count(*) FROM queen_spool_push(NULL, ARRAY['nl3', 'nl3'], ARRAY['p1', 'p2'],
		ARRAY[gen_random_uuid(), gen_random_uuid()], ARRAY['t-1', 't-2'], NULL,
		ARRAY['{}', '{}'], NULL)},
	qr/d.message_id = k.mid/);

# The lookups still answer what they did.
my $ids = $q->partition_ids('nl1');
is($pg->psql(q{SELECT array_to_string(queen_resolve_partitions(ARRAY[NULL, NULL]::uuid[],
		ARRAY['nl1', 'nl1'], ARRAY['p2', 'p3']), ',')}),
	join(',', $ids->{p2}, $ids->{p3}), 'known names resolve to their partitions, in order');
my (undef, $b) = $q->pop('nl3', batch => 10, partition => 'p1');
is(scalar @{ $b->{messages} // [] }, 2, 'the replayed items were stored with the one pushed before');

$q->stop;
done_testing();
