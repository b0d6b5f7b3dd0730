#!/usr/bin/perl
# Refused is not unreachable (SPEC 4, 15): a push the database refuses with an error while it
# is up stays a failure and is not spooled; a spooled push the database keeps refusing on
# replay is set aside (failedCount) after a few attempts, and the pushes behind it are still
# stored, in order. A replay runs on several connections at once (QUEEN_PUSH_LANES), each
# storing its partitions: when one lane is refused and the others commit, the batch is gone
# through again one record at a time, and what the other lanes stored is not stored twice, even
# on a queue that keeps no dedup keys.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend(env => { QUEEN_PUSH_LANES => 2 });

sub buffers { (($q->get('/api/v1/status/buffers'))[1] // {}) }
sub slurp { open my $fh, '<', $_[0] or return ''; local $/; <$fh> }

# A queue PostgreSQL refuses to create (a trigger raises). Names the broker itself refuses
# (too long, control characters) never reach PostgreSQL (SPEC 22), so the refusal is made
# in the database.
my $poison = 'poison';
$pg->psql(q{CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'refused by test'; END$$;
	CREATE TRIGGER test_refuse BEFORE INSERT ON queen_queues FOR EACH ROW
	WHEN (NEW.name = 'poison') EXECUTE FUNCTION test_refuse()});

subtest 'a statement the database refuses is a failure, not a buffered push' => sub {
	my ($s, $b) = $q->push_items({ queue => $poison, transactionId => 'p-0' });
	isnt($s, 201, "not 201 ($s)");
	like($b->{error} // '', qr/push not stored/, 'the error says it was not stored');
	is(buffers()->{pendingCount}, 0, 'nothing spooled');
	is_true(buffers()->{dbHealthy}, 'the database is healthy');
};

subtest 'a replay the database keeps refusing is set aside' => sub {
	$q->post_json('/api/v1/system/maintenance', { enabled => jtrue });
	for my $it ({ queue => 'ref', transactionId => 'ok-0' }, { queue => $poison },
		    { queue => 'ref', transactionId => 'ok-1' }, { queue => 'ref', transactionId => 'ok-2' }) {
		my (undef, $b) = $q->push_items($it);
		is($b->[0]{status}, 'buffered', 'buffered');
	}
	is(buffers()->{pendingCount}, 4, '4 pending');
	$q->post_json('/api/v1/system/maintenance', { enabled => jfalse });
	wait_until(sub { buffers()->{pendingCount} == 0 }, 90, 0.25);
	my $b = buffers();
	is($b->{pendingCount}, 0, 'the spool is drained');
	is($b->{failedCount}, 1, 'failedCount 1');
	like(slurp($q->{log}), qr/set aside in .*failed\.spool/, 'the log says where it went');
	my ($s, $p) = $q->pop('ref', batch => 10);
	is_deeply(txns($p), [ 'ok-0', 'ok-1', 'ok-2' ], 'the others are stored, in order');
	my (undef, $m) = $q->get('/metrics');
	is($m->{spool}{failedCount}, 1, '/metrics spool.failedCount');
};

subtest 'a replay stored in part by its lanes stores nothing twice' => sub {
	$q->configure('part', dedupWindowSeconds => 0);
	$q->post_json('/api/v1/system/maintenance', { enabled => jtrue });
	my @items = map { { queue => 'part', partition => 'p' . ($_ % 8), payload => { n => $_ } } }
		0 .. 39;
	splice @items, 20, 0, { queue => $poison, payload => { n => 'x' } };
	my ($s, $b) = $q->post_json('/api/v1/push', { items => \@items });
	is($s, 201, 'one push of 41 items: 201');
	is(scalar(grep { $_->{status} eq 'buffered' } @$b), 41, 'all buffered');
	$q->post_json('/api/v1/system/maintenance', { enabled => jfalse });
	wait_until(sub { buffers()->{pendingCount} == 0 }, 90, 0.25);
	is(buffers()->{failedCount}, 2, 'the refused item is set aside (failedCount 2)');
	my (%seen, $bad);
	for (1 .. 20) {
		my ($st, $p) = $q->pop('part', batch => 100, partitions => 8);
		last unless $st == 200;
		for my $m (@{ $p->{messages} }) {
			my $n = $m->{data}{n};
			$bad++ if $seen{$n}++;
		}
		$q->ack_all($p);
	}
	is(scalar(keys %seen), 40, 'the 40 good items are stored');
	ok(!$bad, 'none of them twice');
};

done_testing;
