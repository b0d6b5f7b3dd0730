#!/usr/bin/perl
# A push locks its partition's row and never writes it (schema 022): the log end is read from
# the newest segment. While any older transaction is open (a backup's snapshot, a large push
# cut into passes), every version a push left of that row stayed unprunable and each later
# push walked past all of them to find it. Offsets stay dense, in order and the log end
# right under concurrent pushes and beside an open transaction; with the whole log released
# by retention the row keeps the end (t9101).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

sub row_version {
	my $queue = shift;
	return $pg->psql("SELECT p.xmin::text || ' ' || p.ctid::text FROM queen_partitions p " .
		"JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = '$queue'");
}

sub detail_of {
	my $queue = shift;
	my (undef, $d) = $q->get("/api/v1/resources/queues/$queue");
	return (($d // {})->{partitions} // [])->[0] // {};
}

subtest 'pushes leave the partition row as it was' => sub {
	$q->push_n('le', 1, prefix => 'first');
	my $before = row_version('le');
	ok($before, "the row: $before");
	$q->push_n('le', 1, prefix => "one-$_") for 1 .. 20;
	$q->push_n('le', 30, prefix => 'thirty');
	is(row_version('le'), $before, 'no new version of it after 21 more pushes');
	my $p = detail_of('le');
	is($p->{logEnd}, 50, 'logEnd from the newest segment');
	is($p->{messages}, 51, 'messages');
	like($p->{lastMessageAt} // '', iso_re, 'lastMessageAt');
	my ($s, $b) = $q->pop('le', batch => 100);
	is_deeply(offsets($b), [0 .. 50], 'offsets dense, in push order');
};

subtest 'beside an open transaction, concurrent pushes stay dense and in order' => sub {
	my $holder = bg(sub { $pg->psql("BEGIN; SELECT txid_current(); SELECT pg_sleep(3); " .
		"COMMIT;"); 1 });
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity " .
		"WHERE query LIKE '%pg_sleep(3)%' AND state = 'active' " .
		"AND pid <> pg_backend_pid()") eq '1' }, 10, 0.05), 'a transaction is open');
	my @w = map { my $c = $_; bg(sub { $q->push_n('open', 1, prefix => "c$c-$_") for 1 .. 25;
		1 }) } 1 .. 4;
	$_->result(60) for @w;
	is(detail_of('open')->{logEnd}, 99, 'logEnd 99 after 100 pushes from 4 clients');
	my ($s, $b) = $q->pop('open', batch => 200);
	is_deeply(offsets($b), [0 .. 99], 'every offset once');
	my %last;
	my $ordered = 1;
	for my $m (@{ $b->{messages} }) {
		my ($c, $i) = $m->{transactionId} =~ /^(c\d)-(\d+)/ or next;
		$ordered = 0 if defined $last{$c} && $i <= $last{$c};
		$last{$c} = $i;
	}
	ok($ordered, "each client's pushes in its order");
	$holder->result(30);
};

done_testing();
