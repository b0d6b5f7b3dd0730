#!/usr/bin/perl
# Ack (SPEC 6, 21): the answer's shape, the statuses accepted, and the items that fail
# inside a 200 (wrong lease, unknown transactionId, bad status, nack of committed).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();
$q->push_n('ack', 12);

my $BOGUS_LEASE = '01890a5d-ac96-774b-bcce-b302099a8057';

sub pop1 {
	my ($s, $b) = $q->pop('ack', @_);
	is($s, 200, 'popped ' . join(',', @{ txns($b) }));
	return $b;
}

sub ack1 {
	my (%f) = @_;
	my ($s, $b) = $q->post_json('/api/v1/ack', \%f);
	is($s, 200, "POST /api/v1/ack ($f{status}) answers 200");
	is(ref $b, 'ARRAY', 'an array');
	is(scalar @{ $b // [] }, 1, 'of one element');
	return $b->[0];
}

subtest 'a single ack answers an array of one, fully shaped' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed', consumerGroup => '__QUEUE_MODE__');
	is($r->{index}, 0, 'index 0');
	is($r->{transactionId}, 'ack-m-0', 'transactionId');
	is_true($r->{success}, 'success true');
	is_null($r, 'error', 'error null');
	is_true($r->{leaseReleased}, 'leaseReleased: the batch is done');
	is_false($r->{dlq}, 'dlq false');
	is_false($r->{noop}, 'noop false');

	$r = ack1(transactionId => 'ack-m-0', partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'acking it again: success');
	is_true($r->{noop}, 'noop: at or below the cursor, whatever its lease');
	$r = ack1(transactionId => 'ack-m-0', partitionId => $m->{partitionId}, status => 'failed');
	is_false($r->{success}, 'a nack of a committed message fails');
	like($r->{error} // '', qr/already committed/, 'already committed');
};

subtest 'a wrong lease fails the item and changes nothing' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $BOGUS_LEASE, status => 'completed');
	is_false($r->{success}, 'success false');
	like($r->{error} // '', qr/invalid or expired lease/, 'invalid or expired lease');
	my ($s) = $q->pop('ack');
	is($s, 204, 'the real lease still holds the partition');
	$r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'the right lease acks it');
};

subtest 'an unknown transactionId fails the item' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => 'no-such-message', partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_false($r->{success}, 'success false');
	ok(defined $r->{error} && length $r->{error}, "with an error: " . ($r->{error} // ''));
	$r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'the lease was untouched: the real ack works');
};

subtest 'an unknown status fails the item, naming the allowed values' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'bogus');
	is_false($r->{success}, 'success false');
	like($r->{error} // '', qr/$_/, "error names $_") for qw(completed failed retry dlq);
	$r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		leaseId => $m->{leaseId}, status => 'completed');
	is_true($r->{success}, 'nothing moved: the real ack works');
};

subtest 'success, acked and ok mean completed' => sub {
	my $b = pop1(batch => 3);
	my @st = qw(success acked ok);
	my ($s, $r) = $q->ack_batch(undef, map { +{ transactionId => $b->{messages}[$_]{transactionId},
		partitionId => $b->{partitionId}, leaseId => $b->{leaseId}, status => $st[$_] } } 0 .. 2);
	is($s, 200, 'ack batch');
	is_deeply([ map { $_->{index} } @$r ], [ 0, 1, 2 ], 'one element per item, in order');
	is_true($r->[$_]{success}, "$st[$_] accepted") for 0 .. 2;
	is_true($r->[2]{leaseReleased}, 'the batch is done');
	$b = pop1(batch => 1);
	is_deeply(txns($b), ['ack-m-7'], 'the cursor moved past all three');
	$q->ack_all($b);
};

subtest 'null optional fields are absent fields' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		status => 'completed', consumerGroup => undef, error => undef, leaseId => undef);
	is_true($r->{success}, 'consumerGroup, error and leaseId null: a lease-less __QUEUE_MODE__ ack');
	my ($s, $r2) = $q->post_json('/api/v1/ack/batch', { consumerGroup => undef,
		acknowledgments => [] });
	is($s, 200, 'batch with consumerGroup null and no items');
	is_deeply($r2, [], 'answers []');
	$b = pop1(batch => 1);
	is_deeply(txns($b), ['ack-m-9'], 'the cursor moved');
	$q->ack_all($b);
};

subtest 'without leaseId the cursor moves without a lease check' => sub {
	my $b = pop1(batch => 1);
	my $m = $b->{messages}[0];
	my $r = ack1(transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
		status => 'completed');
	is_true($r->{success}, 'lease-less ack');
	$b = pop1(batch => 1);
	is_deeply(txns($b), ['ack-m-11'], 'next message');
};

subtest 'a named group acks its own cursor only' => sub {
	my ($s, $b) = $q->pop('ack', consumerGroup => 'audit', subscriptionMode => 'all', batch => 2);
	my (undef, $r) = $q->ack_all($b);
	is_true($r->[$_]{success}, "audit acked $b->{messages}[$_]{transactionId}") for 0 .. 1;
	($s, $b) = $q->pop('ack', consumerGroup => 'audit', batch => 1);
	is_deeply(txns($b), ['ack-m-2'], 'audit moved on');
	($s, $b) = $q->pop('ack', consumerGroup => 'other', subscriptionMode => 'all', batch => 1);
	is_deeply(txns($b), ['ack-m-0'], 'another group did not');
};

subtest 'ack/batch bodies: read alike whatever their shape' => sub {
	$q->push_n('shape', 3, prefix => 'sh');
	my ($s, $b) = $q->pop('shape', batch => 2, consumerGroup => 'sg', subscriptionMode => 'all');
	my ($m0, $m1) = @{ $b->{messages} };
	# Unknown keys (some a field's name cut short or run on), nulls, escapes, the group
	# after the array: one read, both items.
	my $body = '{"x":[1,{"y":null}],"acknowledgments":[{"transactionId":"'
		. $m0->{transactionId} . '","partitionId":"' . $m0->{partitionId}
		. '","leaseId":"' . $m0->{leaseId} . '","status":"compl\u0065ted","error":null,'
		. '"extra":{"a":[true,false]},"statu":"nonsense","statusX":7,"lease":[]},'
		. '{"transactionId":"' . $m1->{transactionId}
		. '","partitionId":"' . $m1->{partitionId} . '","leaseId":"' . $m1->{leaseId}
		. '","consumerGroup":null}],"consumerGroup":"sg"}';
	my ($as, $ab) = $q->request('POST', '/api/v1/ack/batch', $body);
	is($as, 200, 'a body with unknown keys, nulls and escapes');
	is(scalar(grep { $_->{success} } @$ab), 2, 'both items acked in the group named last');
	ok($ab->[1]{leaseReleased}, 'the lease released by the second');
	($s, $b) = $q->pop('shape', batch => 2, consumerGroup => 'sg');
	is_deeply(txns($b), ['sh-2'], 'the cursor moved past both');

	my @bad = (
		[ '', 'a JSON body is required' ],
		[ '{"acknowledgments":[', qr/at line 1 column/ ],
		[ '[]', 'expected an object' ],
		[ '{"consumerGroup":5,"acknowledgments":[]}', 'consumerGroup must be a string' ],
		[ '{"acknowledgments":{}}', 'acknowledgments must be an array' ],
		[ '{}', 'acknowledgments must be an array' ],
		[ '{"acknowledgments":[7]}', 'acknowledgments[0] must be an object' ],
		[ '{"acknowledgments":[{"transactionId":1}]}',
		  'acknowledgments[0]: transactionId must be a string' ],
		[ '{"acknowledgments":[{"partitionId":"x","leaseId":[]}]}',
		  'acknowledgments[0]: leaseId must be a string' ],
		[ '{"consumerGroup":"a\tb","acknowledgments":[]}',
		  'consumerGroup must not hold control characters' ],
		[ '{"acknowledgments":[{"consumerGroup":"a\u0001b"}]}',
		  'acknowledgments[0]: consumerGroup must not hold control characters' ],
		[ '{"acknowledgments":[{"consumerGroup":"a\u0000b"}]}',
		  qr/^acknowledgments\[0\]: consumerGroup / ],
	);
	for my $c (@bad) {
		my ($bs, $bb) = $q->request('POST', '/api/v1/ack/batch', $c->[0]);
		is($bs, 400, "400 for '$c->[0]'");
		my $msg = ($bb // {})->{error} // '';
		$msg =~ s/^bad body: //;
		ref $c->[1] ? like($msg, $c->[1], "  says $msg") : is($msg, $c->[1], "  says $msg");
	}
	($as, $ab) = $q->request('POST', '/api/v1/ack/batch',
		'{"acknowledgments":[{"transactionId":"t","partitionId":"nope"},'
		. '{"transactionId":"t","partitionId":"' . $m0->{partitionId} . '","status":"meh"}]}');
	is($as, 200, 'items that can only fail: 200');
	is_deeply([ map { $_->{error} } @$ab ],
		[ 'partition not found', 'invalid status: expected completed, failed, retry or dlq' ],
		'each says why');
};

done_testing;
