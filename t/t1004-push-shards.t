#!/usr/bin/perl
# A push batch over many partitions is stored in shards, one transaction per shard on several
# connections at once (QUEEN_PUSH_LANES): every rule of SPEC 4 still holds across them. Each
# partition keeps its items in input order with dense offsets, a repeat of a transactionId
# in the request loses to the first, a committed duplicate answers its original, concurrent
# batches over the same partitions interleave without a gap, and an item the database refuses
# fails alone (with its shard of its own request) while the rest of the request is stored.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
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
			       payload => 'repeat' } } 0 .. 9));
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
					     payload => { k => $k, i => $_ } } } 0 .. 79;
			my ($s, $b) = $q->push_items(@items);
			return [ $s, scalar grep { $_->{status} eq 'queued' } @$b ];
		});
	} 0 .. 5;
	my @r = map { $_->result } @jobs;
	is_deeply(\@r, [ ([ 201, 80 ]) x 6 ], 'six batches of 80 queued');
	for my $p (0 .. 7) {
		my $m = drain_partition('cc', "p$p");
		is_deeply([ map { $_->{offset} } @$m ], [ 0 .. 59 ], "p$p: 60 dense offsets");
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
	# A queue name too long for PostgreSQL's btree index (random, so it does not compress).
	my @c = ('a' .. 'z', 'A' .. 'Z', 0 .. 9);
	my $poison = join '', map { $c[ int rand @c ] } 1 .. 9000;
	my @items = ((map { +{ queue => 'ref', partition => "p$_", payload => $_ } } 0 .. 31),
		     { queue => $poison, payload => 'poison' });
	my ($s, $ans) = $q->push_items(@items);
	is($s, 201, 'status 201: part of the request is stored');
	is($ans->[32]{status}, 'failed', 'the refused item failed');
	like($ans->[32]{error} // '', qr/refused/, 'and says why');
	my @queued = grep { $ans->[$_]{status} eq 'queued' } 0 .. 31;
	my @failed = grep { $ans->[$_]{status} eq 'failed' } 0 .. 31;
	is(@queued + @failed, 32, 'every other item queued or failed');
	cmp_ok(scalar @queued, '>', 0, 'some stored');
	my @popped = map { map { $_->{data} } @{ drain_partition('ref', "p$_") } } 0 .. 31;
	is_deeply([ sort { $a <=> $b } @popped ], \@queued, 'exactly the queued ones are stored');
	my ($s2, $b2) = $q->push_items({ queue => 'ref', partition => 'p0', payload => 'later' });
	is($b2->[0]{status}, 'queued', 'pushes go on');
};

done_testing;
