#!/usr/bin/perl
# A push too large to share a group commit (a heavy one) runs on a lane of its own beside the
# QUEEN_PUSH_LANES of the light pushes (SPEC 22: one large request never stalls the others).
# Before, with one lane, a heavy push held the only lane and every other push waited for its
# commit. A heavy push is one transaction on that lane's connection, never cut into shards
# on several (a group commit is): all of it is stored or none.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
my $q = start_queend(QUEEN_PUSH_LANES => 1, QUEEN_GROUP_COMMIT_ITEMS => 10);

$q->push_n('big', 1, prefix => 'seed');
$q->push_n('small', 1, prefix => 'seed');
my @heavy_items = map { +{ queue => 'big', payload => { i => $_ } } } 1 .. 20;
sub heavy_push { my ($s) = $q->push_items(@heavy_items); return [ $s, time ] }

# Another session holds big's partition row, so a heavy push to it waits on the lock.
my $holder = bg(sub { $pg->psql("BEGIN; SELECT 1 FROM queen_partitions p JOIN queen_queues q " .
	"ON q.id = p.queue_id WHERE q.name = 'big' FOR UPDATE OF p; SELECT pg_sleep(4); COMMIT;");
	1 });
ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity " .
	"WHERE query LIKE '%pg_sleep(4)%' AND state = 'active' AND pid <> pg_backend_pid()") eq '1' },
	10, 0.05), 'the partition of big is locked');
my $heavy = bg(\&heavy_push);
ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity " .
	"WHERE wait_event_type = 'Lock' AND query LIKE '%queen_push%'") ge '1' }, 10, 0.05),
	'the heavy push waits for the lock');

my $t = time;
my ($s, $b) = $q->push_items({ queue => 'small', transactionId => 'light-1' });
my $light_took = time - $t;
is($s, 201, 'a light push beside it is stored');
is($b->[0]{status}, 'queued', 'queued');
ok(!$heavy->done, 'before the heavy push was answered (it does not wait for its lane)')
	or diag("light push took $light_took s");

my $r = $heavy->result(30);
is($r->[0], 201, 'the heavy push is stored once the lock is gone');
$holder->result(30);
# The lane is free again for the next heavy push.
$r = heavy_push();
is($r->[0], 201, 'the next heavy push is stored');
is($pg->psql("SELECT p.next_offset FROM queen_partitions p JOIN queen_queues q " .
	"ON q.id = p.queue_id WHERE q.name = 'big'"), 41, 'every item of both is stored, once');

subtest 'a heavy push is one transaction, with lanes to shard it over' => sub {
	my $wide = start_queend(QUEEN_PUSH_LANES => 4, QUEEN_GROUP_COMMIT_ITEMS => 10);
	# A queue PostgreSQL refuses to create (a trigger raises).
	$pg->psql(q{CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'refused by test'; END$$;
		CREATE TRIGGER test_refuse BEFORE INSERT ON queen_queues FOR EACH ROW
		WHEN (NEW.name = 'poison') EXECUTE FUNCTION test_refuse()});
	my @items = ((map { +{ queue => 'whole', partition => "p$_", payload => $_ } } 0 .. 31),
		     { queue => 'poison', payload => 'poison' });
	my ($s) = $wide->push_items(@items);
	isnt($s, 201, "one item refused: the heavy push is refused ($s)");
	is($pg->psql("SELECT count(*) FROM queen_queues WHERE name = 'whole'"), 0,
		'and nothing of it is stored');
	($s, my $b) = $wide->push_items(@items[0 .. 31]);
	is($s, 201, 'without that item: stored');
	is(scalar(grep { $_->{status} eq 'queued' } @$b), 32, 'every item queued');
	is($pg->psql("SELECT sum(p.next_offset) FROM queen_partitions p JOIN queen_queues q " .
		"ON q.id = p.queue_id WHERE q.name = 'whole'"), 32, 'over its 32 partitions');
};

done_testing();
