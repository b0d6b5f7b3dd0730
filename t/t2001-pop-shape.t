#!/usr/bin/perl
# Pop (SPEC 5): the answer exactly as clients read it, 204 when there is nothing, batch
# limits and offset order, the partition route, autoAck, and autopilot.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

my @TOP = qw(success queue partition partitionId leaseId consumerGroup partitionsClaimed messages);
my @MSG = qw(id transactionId traceId data createdAt partitionId partition queue offset leaseId
	consumerGroup deliveryAttempt);

my ($s, $pushed) = $q->push_items(
	map { +{ queue => 'orders', partition => 'p7', payload => { orderId => 9137 + $_ },
		transactionId => "t$_", ($_ == 1 ? (traceId => 'tr-1') : ()) } } 0 .. 2);
is($s, 201, 'pushed three messages to orders/p7');

subtest 'a named group: every field of the answer' => sub {
	my ($s, $b, $h) = $q->pop('orders', consumerGroup => 'workers', subscriptionMode => 'all');
	is($s, 200, 'status 200');
	like($h->{'content-type'} // '', qr{^application/json}, 'JSON answer');
	ok(exists $b->{$_}, "top-level $_ present") for @TOP;
	ok(!exists $b->{autopilot}, 'no autopilot field when autopilot chose nothing');
	is_true($b->{success}, 'success true');
	is($b->{queue}, 'orders', 'queue');
	is($b->{partition}, 'p7', 'partition');
	ok(defined $b->{partitionId} && !ref $b->{partitionId} && length $b->{partitionId},
		'partitionId is an opaque string');
	like($b->{leaseId}, uuid_re, 'leaseId is a UUIDv7');
	is($b->{consumerGroup}, 'workers', 'consumerGroup');
	is($b->{partitionsClaimed}, 1, 'partitionsClaimed 1');
	is(scalar @{ $b->{messages} }, 3, 'three messages');
	for my $i (0 .. 2) {
		my $m = $b->{messages}[$i];
		ok(exists $m->{$_}, "message $i: $_ present") for @MSG;
		is($m->{id}, $pushed->[$i]{message_id}, "message $i: id is the pushed message_id");
		is($m->{transactionId}, "t$i", "message $i: transactionId");
		is_deeply($m->{data}, { orderId => 9137 + $i }, "message $i: data");
		like($m->{createdAt}, iso_re, "message $i: createdAt ISO-8601 with ms");
		is($m->{partitionId}, $b->{partitionId}, "message $i: partitionId");
		is($m->{partition}, 'p7', "message $i: partition");
		is($m->{queue}, 'orders', "message $i: queue");
		is($m->{offset}, $i, "message $i: offset");
		is($m->{leaseId}, $b->{leaseId}, "message $i: leaseId is the pop's");
		is($m->{consumerGroup}, 'workers', "message $i: consumerGroup");
		is($m->{deliveryAttempt}, 1, "message $i: deliveryAttempt 1");
	}
	is_null($b->{messages}[0], 'traceId', 'traceId null when not pushed');
	is($b->{messages}[1]{traceId}, 'tr-1', 'traceId as pushed');
	my $t0 = iso_epoch($b->{messages}[0]{createdAt});
	ok(abs($t0 - time) < 120, 'createdAt is now, in UTC');
};

subtest 'no group: __QUEUE_MODE__, which starts at the beginning' => sub {
	my ($s, $b) = $q->pop('orders');
	is($s, 200, 'status 200');
	is($b->{consumerGroup}, '__QUEUE_MODE__', 'consumerGroup echoed as __QUEUE_MODE__');
	is($b->{messages}[0]{consumerGroup}, '__QUEUE_MODE__', 'and on each message');
	is_deeply(offsets($b), [ 0, 1, 2 ], 'the whole backlog');
	$q->ack_all($b);
};

subtest 'nothing to deliver: 204 without a body' => sub {
	my ($s, $b, $h, $raw) = $q->pop('orders');
	is($s, 204, 'consumed queue: 204');
	is($raw, '', 'no body');
	($s, undef, undef, $raw) = $q->pop('no-such-queue');
	is($s, 204, 'unknown queue: 204');
	is($raw, '', 'no body');
	($s) = $q->pop('orders', partition => 'no-such-partition');
	is($s, 204, 'unknown partition: 204');
};

subtest 'batch limits the answer; offsets come in order and none is skipped' => sub {
	$q->push_n('batchq', 5);
	my @seen;
	for my $want ([ 0, 1 ], [ 2, 3 ], [4]) {
		my ($s, $b) = $q->pop('batchq', batch => 2);
		is($s, 200, 'pop batch=2');
		is_deeply(offsets($b), $want, "offsets @$want");
		push @seen, @{ offsets($b) };
		my ($as, $ab) = $q->ack_all($b);
		ok(!grep({ !$_->{success} } @$ab), 'acked');
	}
	is_deeply(\@seen, [ 0 .. 4 ], 'every offset once, in order');
	my ($s) = $q->pop('batchq', batch => 2);
	is($s, 204, 'then 204');
};

subtest 'partition route: that partition only' => sub {
	$q->push_n('multi', 2, partition => 'p1', prefix => 'one');
	$q->push_n('multi', 2, partition => 'p2', prefix => 'two');
	my ($s, $b) = $q->pop('multi', partition => 'p2', batch => 10);
	is($s, 200, 'pop multi/p2');
	is($b->{partition}, 'p2', 'partition p2');
	is_deeply(txns($b), [ 'two-0', 'two-1' ], 'p2 messages only');
	is_deeply([ map { $_->{partition} } @{ $b->{messages} } ], [ 'p2', 'p2' ], 'each names p2');
};

subtest 'partitions=N claims several partitions under one lease' => sub {
	$q->push_n('spread', 2, partition => "s$_", prefix => "s$_") for 1 .. 3;
	my ($s, $b) = $q->pop('spread', partitions => 2, batch => 3);
	is($s, 200, 'pop partitions=2 batch=3');
	is($b->{partitionsClaimed}, 2, 'two partitions claimed');
	is(scalar @{ $b->{messages} }, 3, 'batch counts over all partitions');
	my %by;
	push @{ $by{ $_->{partition} } }, $_->{offset} for @{ $b->{messages} };
	is(scalar keys %by, 2, 'messages from two partitions');
	is_deeply($_, [ 0 .. $#$_ ], 'each partition in offset order from 0') for values %by;
	ok(!grep({ $_->{leaseId} ne $b->{leaseId} } @{ $b->{messages} }), 'one lease id for all');
	ok(exists $by{ $b->{partition} }, 'top-level partition is one of those claimed');
	my ($p) = grep { $_->{partition} eq $b->{partition} } @{ $b->{messages} };
	is($b->{partitionId}, $p->{partitionId}, 'top-level partitionId matches it');
};

subtest 'segments stored out of offset order: the answer is in offset order all the same' => sub {
	# One segment per push; rewriting the first two moves them past the third in the table,
	# where a scan of the table meets them last (as in space retention freed). Whether the
	# pop's plan scans so or by the key, the answer must be in order; the reordering itself
	# is unit-tested (t/unit/test-pgbin.c).
	for my $i (0 .. 2) {
		my ($s) = $q->push_items(map { +{ queue => 'moved', partition => "m$_",
			transactionId => "m$_-$i" } } 1, 2);
		is($s, 201, "push $i");
	}
	$pg->psql("UPDATE queen_segments s SET end_offset = s.end_offset FROM queen_partitions p "
		. "WHERE p.id = s.partition_id AND p.name IN ('m1', 'm2') AND s.base_offset < 2");
	like($pg->psql("SELECT string_agg(s.base_offset::text, ',' ORDER BY s.ctid) "
		. "FROM queen_segments s JOIN queen_partitions p ON p.id = s.partition_id "
		. "WHERE p.name = 'm1'"), qr/^2,/, 'the newest segment of m1 comes first in the table');
	my ($s, $b) = $q->pop('moved', partitions => 2, batch => 6);
	is($s, 200, 'pop over both partitions');
	my @got = map { "$_->{partition}:$_->{offset}" } @{ $b->{messages} };
	my ($first) = $got[0] =~ /^(m\d)/;
	my $other = $first eq 'm1' ? 'm2' : 'm1';
	is_deeply(\@got, [ map({ "$first:$_" } 0 .. 2), map({ "$other:$_" } 0 .. 2) ],
		'each partition together, in offset order') or diag(join ' ', @got);
	is_deeply([ map { $_->{transactionId} } @{ $b->{messages} } ],
		[ map({ "$first-$_" } 0 .. 2), map({ "$other-$_" } 0 .. 2) ],
		'each message with its own transactionId');
	$q->ack_all($b);
	($s) = $q->pop('moved', partitions => 2);
	is($s, 204, 'the acks of the reordered rows committed everything');
};

subtest 'autoAck: no lease, the cursor is committed by the pop' => sub {
	$q->push_n('auto', 3);
	my ($s, $b) = $q->pop('auto', autoAck => 'true', batch => 2);
	is($s, 200, 'pop autoAck=true');
	is($b->{leaseId}, '', 'top-level leaseId ""');
	is_deeply([ map { $_->{leaseId} } @{ $b->{messages} } ], [ '', '' ], 'message leaseIds ""');
	is_deeply(offsets($b), [ 0, 1 ], 'offsets 0, 1');
	($s, $b) = $q->pop('auto', autoAck => '1');
	is($s, 200, 'the next pop (autoAck=1) is not blocked by a lease');
	is_deeply(offsets($b), [2], 'and starts after what was auto-acked');
	($s) = $q->pop('auto');
	is($s, 204, 'nothing is redelivered');
};

subtest 'autopilot=true chooses what the request did not send' => sub {
	$q->push_n('ap', 250);
	my ($s, $b) = $q->pop('ap', autopilot => 'true');
	is($s, 200, 'pop autopilot=true');
	ok(ref $b->{autopilot} eq 'HASH', 'answer carries autopilot') or return;
	is($b->{autopilot}{batch}, 100, 'batch = QUEEN_POP_AUTOPILOT_BATCH default 100');
	ok($b->{autopilot}{partitions} >= 1 && $b->{autopilot}{partitions} <= 64,
		'partitions within [1, 64]');
	is(scalar @{ $b->{messages} }, 100, '100 messages');
	is_deeply(offsets($b), [ 0 .. 99 ], 'in offset order');
	$q->ack_all($b);
	($s, $b) = $q->pop('ap', autopilot => 'true', batch => 5, partitions => 1);
	is(scalar @{ $b->{messages} }, 5, 'knobs the client sent are used as sent');
	ok(!exists $b->{autopilot}, 'and nothing chosen, nothing echoed');
	$q->ack_all($b);

	my $off = start_queend(QUEEN_POP_AUTOPILOT => 'off');
	($s, $b) = $off->pop('ap', autopilot => 'true');
	is($s, 200, 'QUEEN_POP_AUTOPILOT=off: pop still works');
	ok(!exists $b->{autopilot}, 'the flag is ignored');
	is(scalar @{ $b->{messages} }, 145, 'served as sent: batch 200 takes the remaining 145');
};

done_testing;
