#!/usr/bin/perl
# No planner statistics are gathered for a segment's arrays (schema/023): no statement
# filters on them, and an ANALYZE of queen_segments read and hashed every element of its
# sampled rows (payloads decompressed) for them. The scalar columns keep theirs, and the
# reads that look inside the arrays (message detail by transactionId, pop) still find what
# they look for.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

# Segments of several messages, each with a transactionId and a traceId.
for my $round (1 .. 5) {
	my ($s) = $q->push_items(map { +{ queue => 'st', partition => 'p' . ($_ % 3),
		transactionId => "r$round-$_", traceId => "t$round-$_",
		payload => { round => $round, i => $_, pad => 'x' x 200 } } } 1 .. 30);
	is($s, 201, "push $round stored");
}
$pg->psql('ANALYZE queen_segments');
my $cols = $pg->psql("SELECT string_agg(attname, ',' ORDER BY attname) FROM pg_stats " .
	"WHERE schemaname = 'public' AND tablename = 'queen_segments'");
is($cols, 'base_offset,created_at,end_offset,partition_id',
	'ANALYZE keeps statistics for the scalar columns only');

my $pid = $q->partition_ids('st')->{p1};
my ($s, $m) = $q->get("/api/v1/messages/$pid/r3-4");
is($s, 200, 'a message is found by its transactionId');
is($m->{data}{round}, 3, 'the right one') or diag(explain($m));

my ($ps, $pb) = $q->pop('st', partition => 'p2', batch => 100, autoAck => 'true');
is($ps, 200, 'a pop reads the segments');
is(scalar @{ $pb->{messages} }, 50, 'every message of the partition');
is($pb->{messages}[0]{traceId}, 't1-2', 'with its traceId');

done_testing();
