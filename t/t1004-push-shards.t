#!/usr/bin/perl
# A push batch of 100 items or more (WK_SPLIT_MIN_ITEMS) over many partitions is stored in
# shards, one transaction per shard on several connections at once (QUEEN_PUSH_LANES): every
# rule of SPEC 4 still holds across them. Each partition keeps its items in input order with
# dense offsets, a repeat of a transactionId in the request loses to the first, a committed
# duplicate answers its original, concurrent batches over the same partitions interleave
# without a gap, and an item the database refuses fails alone (with its shard of its own
# request) while the rest of the request is stored.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend(QUEEN_PUSH_LANES => 4);

# Every message of a partition, in offset order (queue mode, autoAck).
sub drain_partition {
	my ($queue, $part) = @_;
	my (@msgs, $s, $b);
	do {
		($s, $b) = $q->pop($queue, partition => $part, batch => 1000, autoAck => 'true');
		push @msgs, @{ $b->{messages} } if $s == 200;
	} while ($s == 200);
	return \@msgs;
}

subtest 'one batch over 10 partitions: input order and dense offsets per partition' => sub {
	my @items = map { +{ queue => 'sh', partition => 'p' . ($_ % 10), transactionId => "t$_",
			     payload => { i => $_ } } } 0 .. 99;
	my ($s, $b) = $q->push_items(@items);
	is($s, 201, 'status 201');
	is(scalar @$b, 100, 'one verdict per item');
	is_deeply([ map { $_->{index} } @$b ], [ 0 .. 99 ], 'in input order');
	is_deeply([ grep { $_->{status} ne 'queued' } @$b ], [], 'every item queued');
	for my $p (0 .. 9) {
		my $m = drain_partition('sh', "p$p");
		is_deeply([ map { $_->{data}{i} } @$m ], [ grep { $_ % 10 == $p } 0 .. 99 ],
			  "p$p: the items of p$p in input order");
		is_deeply([ map { $_->{offset} } @$m ], [ 0 .. 9 ], "p$p: offsets 0..9");
	}
};

subtest 'repeats in the request and committed duplicates, across shards' => sub {
	my @items = ((map { +{ queue => 'sh', partition => "p$_", transactionId => 't0',
			      payload => 'again' } } 0 .. 9),
		     (map { +{ queue => 'sh', partition => "p$_", transactionId => "new-$_",
			       payload => 'first' } } 0 .. 9),
		     (map { +{ queue => 'sh', partition => "p$_", transactionId => "new-$_",
			       payload => 'repeat' } } 0 .. 9),
		     # enough more to be cut into shards (WK_SPLIT_MIN_ITEMS)
		     (map { +{ queue => 'sh-fill', partition => "f$_", payload => $_ } } 0 .. 69));
	my ($s, $b) = $q->push_items(@items);
	is($s, 201, 'status 201');
	# t0 was committed only in p0 (item 0 of the first batch); t<n> in p<n % 10>.
	is($b->[0]{status}, 'duplicate', 't0 in p0 is a committed duplicate');
	is_deeply([ map { $b->[$_]{status} } 1 .. 9 ], [ ('queued') x 9 ],
		  't0 in p1..p9 is new there');
	is_deeply([ map { $b->[$_]{status} } 10 .. 19 ], [ ('queued') x 10 ], 'first ones queued');
	is_deeply([ map { $b->[$_]{status} } 20 .. 29 ], [ ('duplicate') x 10 ],
		  'repeats in the request are duplicates');
	is_deeply([ map { $b->[$_ + 20]{message_id} } 0 .. 9 ],
		  [ map { $b->[$_ + 10]{message_id} } 0 .. 9 ], 'of the first one');
};

subtest 'concurrent batches over the same partitions: no gap, each batch in order' => sub {
	my @jobs = map {
		my $k = $_;
		bg(sub {
			my @items = map { +{ queue => 'cc', partition => 'p' . ($_ % 8),
					     payload => { k => $k, i => $_ } } } 0 .. 119;
			my ($s, $b) = $q->push_items(@items);
			return [ $s, scalar grep { $_->{status} eq 'queued' } @$b ];
		});
	} 0 .. 5;
	my @r = map { $_->result } @jobs;
	is_deeply(\@r, [ ([ 201, 120 ]) x 6 ], 'six batches of 120 queued');
	for my $p (0 .. 7) {
		my $m = drain_partition('cc', "p$p");
		is_deeply([ map { $_->{offset} } @$m ], [ 0 .. 89 ], "p$p: 90 dense offsets");
		my %last;
		my $ordered = 1;
		for (@$m) {
			$ordered = 0 if defined $last{ $_->{data}{k} } && $last{ $_->{data}{k} } > $_->{data}{i};
			$last{ $_->{data}{k} } = $_->{data}{i};
		}
		ok($ordered, "p$p: each batch's items in its order");
	}
};

subtest 'a refused item fails with its shard of its request; the rest is stored' => sub {
	# A queue PostgreSQL refuses to create (a trigger raises): names the broker refuses
	# itself never reach PostgreSQL (SPEC 22).
	my $poison = 'poison';
	$pg->psql(q{CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'refused by test'; END$$;
		CREATE TRIGGER test_refuse BEFORE INSERT ON queen_queues FOR EACH ROW
		WHEN (NEW.name = 'poison') EXECUTE FUNCTION test_refuse()});
	my @items = ((map { +{ queue => 'ref', partition => "p$_", payload => $_ } } 0 .. 127),
		     { queue => $poison, payload => 'poison' });
	my ($s, $ans) = $q->push_items(@items);
	is($s, 201, 'status 201: part of the request is stored');
	is($ans->[128]{status}, 'failed', 'the refused item failed');
	like($ans->[128]{error} // '', qr/refused/, 'and says why');
	my @queued = grep { $ans->[$_]{status} eq 'queued' } 0 .. 127;
	my @failed = grep { $ans->[$_]{status} eq 'failed' } 0 .. 127;
	is(@queued + @failed, 128, 'every other item queued or failed');
	cmp_ok(scalar @queued, '>', 0, 'some stored');
	my @popped = map { map { $_->{data} } @{ drain_partition('ref', "p$_") } } 0 .. 127;
	is_deeply([ sort { $a <=> $b } @popped ], \@queued, 'exactly the queued ones are stored');
	my ($s2, $b2) = $q->push_items({ queue => 'ref', partition => 'p0', payload => 'later' });
	is($b2->[0]{status}, 'queued', 'pushes go on');
};

done_testing;
