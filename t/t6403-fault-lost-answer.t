#!/usr/bin/perl
# A push commits but its answer is lost with the connection (SPEC 15, 19): the broker cannot
# tell whether it was stored, spools it and answers "buffered"; the replay must then find it
# stored and not store it again, for an item without a transactionId (no dedup key: found by
# its message id) as for one with. Before, the item without one was stored twice.
# A proxy between broker and PostgreSQL forwards the push statement and swallows its answer.
# The replay's question (queen_spool_stored) holds whatever the broker's clock says against
# the database's: the ids carry the broker's time, the segments the database's.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;
use QueenProxy;

my $pg = start_pg();
my $px = QueenProxy->start($pg->port);
my $q = start_queend(PG_PORT => $px->port, QUEEN_STMT_TIMEOUT_MS => 5000);

my ($s, $b) = $q->push_items({ queue => 'la', payload => { k => 'warm' } });
is($b->[0]{status}, 'queued', 'a push through the proxy is queued');

sub stored {
	my $k = shift;
	return $pg->psql("SELECT count(*) FROM queen_segments s JOIN queen_partitions p " .
		"ON p.id = s.partition_id JOIN queen_queues q ON q.id = p.queue_id, " .
		"unnest(s.payloads) x WHERE q.name = 'la' AND (x::json)->>'k' = '$k'");
}

$px->mode('swallow:push');
my %answer;
for my $item ({ queue => 'la', payload => { k => 'plain' } },
	      { queue => 'la', transactionId => 'keyed', payload => { k => 'keyed' } }) {
	($s, $b) = $q->push_items($item);
	is($s, 201, "$item->{payload}{k}: answered 201 though the answer of its commit was lost");
	is($b->[0]{status}, 'buffered', "$item->{payload}{k}: buffered");
	$answer{ $item->{payload}{k} } = $b->[0]{message_id};
	is(stored($item->{payload}{k}), 1, "$item->{payload}{k}: yet it was committed");
}

$px->mode('pass');
wait_until(sub { (($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} == 0 }, 20, 0.1);
($s, $b) = $q->get('/api/v1/status/buffers');
is($b->{pendingCount}, 0, 'the spool drained');
is($b->{failedCount}, 0, 'nothing set aside');
is(stored('plain'), 1, 'spool_replay_lost_answer_no_txn: the item without a transactionId is stored once');
is(stored('keyed'), 1, 'the item with a transactionId is stored once');

my %got;
wait_until(sub {
	my ($ps, $p) = $q->pop('la', batch => 10);
	if ($ps == 200) {
		$got{ $_->{data}{k} } = $_->{id} for @{ $p->{messages} };
		$q->ack_all($p);
	}
	keys %got >= 3;
}, 10, 0.1);
is($got{$_}, $answer{$_}, "$_: delivered with the message id it was answered") for sort keys %answer;
($s) = $q->pop('la');
is($s, 204, 'nothing else');

subtest 'the stored check holds with the broker clock ahead of or behind the database' => sub {
	my $db_ms = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
	for my $case ([ 'agree', 0 ], [ 'broker 2 h ahead', 7_200_000 ],
		      [ 'broker 2 h behind', -7_200_000 ]) {
		my ($what, $off) = @$case;
		# Two ids made by a broker whose clock is off by $off; the first one is stored.
		my @id = map { $pg->psql("SELECT (lpad(to_hex($db_ms + ($off)), 12, '0') || '7' || " .
			"substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid") }
			1 .. 2;
		$pg->psql("SELECT count(*) FROM queen_push(NULL, ARRAY['clock'], ARRAY['p'], " .
			  "ARRAY['$id[0]']::uuid[], NULL, NULL, ARRAY['{}'], NULL)");
		my $found = $pg->psql("SELECT coalesce(string_agg(idx::text, ','), '') FROM " .
			"queen_spool_stored(ARRAY['clock', 'clock'], ARRAY['p', 'p'], " .
			"ARRAY['$id[0]', '$id[1]']::uuid[], $db_ms + ($off))");
		is($found, '0', "$what: the stored id is found, the other is not");
	}
	# Segments written before an id was made are not read (that is what keeps it cheap): an
	# id claiming a time an hour after its commit, from a broker whose clock agrees, is not
	# looked for there.
	my $id = $pg->psql("SELECT (lpad(to_hex($db_ms + 3600000), 12, '0') || '7abc8' || " .
			   "substr(md5(random()::text), 1, 15))::uuid");
	$pg->psql("SELECT count(*) FROM queen_push(NULL, ARRAY['clock'], ARRAY['p'], " .
		  "ARRAY['$id']::uuid[], NULL, NULL, ARRAY['{}'], NULL)");
	is($pg->psql("SELECT count(*) FROM queen_spool_stored(ARRAY['clock'], ARRAY['p'], " .
		     "ARRAY['$id']::uuid[], $db_ms)"), 0, 'segments older than the id are not read');
};

done_testing;
