#!/usr/bin/perl
# A partition created by a push gets a UUID of version 7 (queen_uuid_v7): its first 48 bits
# are the time of creation in milliseconds, so partitions created later sort after those
# created before in every index keyed by partition id. Pushes racing to create the same
# partition still agree on one id.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

my @ids;
for my $k (1 .. 3) {
	my $t0 = int(time * 1000);
	$q->push_n('pid', 1, partition => "p$k", prefix => "p$k");
	my $t1 = int(time * 1000);
	my $id = $q->partition_ids('pid')->{"p$k"} // '';
	like($id, uuid_re(), "p$k: a UUID of version 7 ($id)");
	(my $hex = $id) =~ s/-//g;
	my $ms = hex(substr($hex, 0, 12));
	# The database's clock is the machine's: the same one the test reads.
	ok($ms >= $t0 - 5 && $ms <= $t1 + 5, "p$k: its time is the push's ($ms in [$t0, $t1])");
	push @ids, $id;
	sleep 0.01;
}
is_deeply([ sort @ids ], \@ids, 'partitions created later sort after those created before');

# Eight pushes at once, each creating the same 20 partitions of a new queue.
my @runs = map { my $n = $_; bg(sub {
	my ($s, $b) = $q->push_items(map { +{ queue => 'race', partition => "r$_",
		payload => { n => $n, i => $_ } } } 1 .. 20);
	return $s == 201 && !grep { $_->{status} ne 'queued' } @$b;
}) } 1 .. 8;
is(scalar(grep { $_->result(30) } @runs), 8, 'eight racing pushes are all stored');
is($pg->psql("SELECT count(*) || '/' || count(DISTINCT p.id) FROM queen_partitions p " .
	"JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = 'race'"), '20/20',
	'one partition, one id, each');
is($pg->psql("SELECT sum(cardinality(s.ids)) FROM queen_segments s JOIN queen_partitions p " .
	"ON p.id = s.partition_id JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = 'race'"),
	160, 'every item stored under it');

done_testing();
