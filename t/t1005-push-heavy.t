#!/usr/bin/perl
# A push too large to share a group commit (a heavy one) runs on a lane of its own beside the
# QUEEN_PUSH_LANES of the light pushes (SPEC 22: one large request never stalls the others).
# Before, with one lane, a heavy push held the only lane and every other push waited for its
# commit. A heavy push is one transaction on that lane's connection, never cut into shards
# on several (a group commit is): all of it is stored or none. Past 1000 items and 1 MiB of
# payloads the broker sends it in passes of one transaction (queen_push copied its whole
# arrays for every slice it took of them). While other requests run, a large body is read and
# stored in steps with pauses between them (pace.h), counted in /metrics largeWork; alone it
# goes straight through.
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
is($pg->psql("SELECT sum(cardinality(s.ids)) FROM queen_segments s " .
	"JOIN queen_partitions p ON p.id = s.partition_id JOIN queen_queues q " .
	"ON q.id = p.queue_id WHERE q.name = 'big'"), 41, 'every item of both is stored, once');

subtest 'a push of 1000 items and 1 MiB: passes of one transaction' => sub {
	$pg->psql("ALTER SYSTEM SET track_functions = 'pl'");
	$pg->psql("SELECT pg_reload_conf()");
	my $calls = sub { $pg->psql("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions " .
		"WHERE funcname = 'queen_push'") };
	my $pauses = sub { my (undef, $m) = $q->get('/metrics'); $m->{largeWork}{pauses} };
	my $paused = $pauses->();
	# Each backend reports its calls within ~10 s of going idle.
	sleep 0.5;
	my $before = $calls->();
	my $pad = 'x' x 1000;
	my @items = map { +{ queue => 'passes', partition => 'p' . ($_ % 3), transactionId => "t$_",
		payload => { i => $_, pad => $pad } } } 1 .. 2500;
	# A repeat, in the third pass, of a transactionId the first pass stored.
	$items[2399] = { queue => 'passes', partition => 'p2', transactionId => 't5',
		payload => { i => 2400, pad => $pad } };
	my ($s, $b) = $q->push_items(@items);
	is($s, 201, 'stored');
	is(scalar(grep { $_->{status} eq 'queued' } @$b), 2499, 'every item queued but one');
	is($b->[2399]{status}, 'duplicate', 'the repeat is its duplicate');
	is($b->[2399]{messageId}, $b->[4]{messageId}, 'with the first pass\'s message id');
	# Work the broker saw beside it (pace.h) slows the body's receipt or cuts the passes
	# shorter, with a pause after each: as many calls or more, never one that loops itself
	# (the passes are the broker's). A pause counts either kind.
	if ($pauses->() == $paused) {
		ok(wait_until(sub { $calls->() - $before == 3 }, 20, 0.2),
			'queen_push called three times (1000, 1000, 500 items), not once to loop ' .
			'itself') or diag('calls: ' . ($calls->() - $before));
	} else {
		ok(wait_until(sub { $calls->() - $before >= 3 }, 20, 0.2),
			'paced beside other work: queen_push called once a pass, shorter ones too') or
			diag('calls: ' . ($calls->() - $before));
	}
	my %seen;
	for my $p (0 .. 2) {
		my @i;
		while (1) {
			my ($ps, $pb) = $q->pop('passes', partition => "p$p", batch => 1000);
			last unless $ps == 200;
			push @i, map { $_->{data}{i} } @{ $pb->{messages} };
			push @{ $seen{$p} }, @{ offsets($pb) };
			$q->ack_all($pb);
		}
		is_deeply(\@i, [ grep { $_ % 3 == $p && $_ != 2400 } 1 .. 2500 ],
			"partition p$p: every item, in input order");
		is_deeply($seen{$p}, [ 0 .. $#i ], "partition p$p: offsets dense");
	}
	$pg->psql(q{CREATE FUNCTION test_refuse_pass() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'refused by test'; END$$;
		CREATE TRIGGER test_refuse_pass BEFORE INSERT ON queen_queues FOR EACH ROW
		WHEN (NEW.name = 'poison-pass') EXECUTE FUNCTION test_refuse_pass()});
	$_->{queue} = 'passes2' for @items;
	$items[2449] = { queue => 'poison-pass', payload => 1 };
	($s) = $q->push_items(@items);
	isnt($s, 201, "an item of the third pass refused: the push is refused ($s)");
	is($pg->psql("SELECT count(*) FROM queen_queues WHERE name = 'passes2'"), 0,
		'and nothing of the passes before it is stored');
	($s, $b) = $q->push_items({ queue => 'passes2', payload => 1 });
	is($s, 201, 'the next push on that connection is stored');
	$pg->psql("ALTER SYSTEM RESET track_functions");
	$pg->psql("SELECT pg_reload_conf()");
};

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
	is($pg->psql("SELECT sum(cardinality(s.ids)) FROM queen_segments s " .
		"JOIN queen_partitions p ON p.id = s.partition_id JOIN queen_queues q " .
		"ON q.id = p.queue_id WHERE q.name = 'whole'"), 32, 'over its 32 partitions');
};

subtest 'a large push beside other work goes in steps, and is stored whole and in order' => sub {
	my $pad = 'p' x 3000;
	my @items = map { +{ queue => 'paced', partition => 'p' . ($_ % 4), transactionId => "t$_",
		payload => { pad => $pad, i => $_ } } } 0 .. 1999;
	my $pauses = sub { my (undef, $m) = $q->get('/metrics'); $m->{largeWork}{pauses} };
	my $p0 = $pauses->();
	my ($s) = $q->push_items(@items);
	is($s, 201, 'alone: a 6 MiB push is stored');
	is($pauses->(), $p0, 'without a pause');

	# Other work: a push that waits for a row lock another session holds keeps a worker
	# busy for as long as the large push runs.
	my $holder = bg(sub { $pg->psql("BEGIN; SELECT 1 FROM queen_partitions p JOIN " .
		"queen_queues q ON q.id = p.queue_id WHERE q.name = 'small' FOR UPDATE OF p; " .
		"SELECT pg_sleep(6); COMMIT;"); 1 });
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity " .
		"WHERE query LIKE '%pg_sleep(6)%' AND state = 'active' " .
		"AND pid <> pg_backend_pid()") eq '1' }, 10, 0.05),
		'the partition of small is locked');
	my $small = bg(sub { my ($ls) = $q->push_items({ queue => 'small', payload => 'beside' });
		$ls });
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity " .
		"WHERE wait_event_type = 'Lock' AND query LIKE '%queen_push%'") ge '1' }, 10, 0.05),
		'a small push waits for it on a worker');
	my @second = map { +{ %$_, queue => 'paced2' } } @items;
	($s, my $b) = $q->push_items(@second);
	is($s, 201, 'beside it, the large push is stored');
	is(scalar(grep { $_->{status} eq 'queued' } @$b), 2000, 'every item queued');
	ok($pauses->() - $p0 >= 10, 'in steps, with pauses for the other work (' .
		($pauses->() - $p0) . ')');
	is($small->result(30), 201, 'the small push is stored once the lock is gone');
	$holder->result(30);
	for my $part (0 .. 3) {
		my ($ps, $pop) = $q->pop('paced2', partition => "p$part", batch => 1000);
		my @want = map { "t" . ($_ * 4 + $part) } 0 .. 499;
		is_deeply(txns($pop), \@want, "partition p$part: its 500 items, in order");
		is_deeply(offsets($pop), [ 0 .. 499 ], 'at dense offsets');
	}
};

done_testing();
