#!/usr/bin/perl
# Bodies the transaction route refuses (SPEC 2, 8): 400 for a body that is not an object, no
# operations and no riders, an operation that is not an object or of unknown type, and
# whatever /push and /ack refuse in an item (checked with their own parsers, so the messages
# name the operation). A refused bundle changes nothing. An empty bundle is a success.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

my $pid = '01900000-0000-7000-8000-0000000000aa';
my @bad = (
	[ 'an array body', '[]', qr/object/ ],
	[ 'no operations', '{}', qr/operations/ ],
	[ 'operations not an array', '{"operations":{"type":"push"}}', qr/operations/ ],
	[ 'an operation that is not an object', '{"operations":[1]}', qr/operations\[0\]/ ],
	[ 'an operation without type', '{"operations":[{"queue":"x1"}]}', qr/operations\[0\].*type/ ],
	[ 'an unknown type', '{"operations":[{"type":"push","queue":"x1"},{"type":"pop","queue":"x1"}]}',
	  qr/operations\[1\].*push or ack/ ],
	[ 'type not a string', '{"operations":[{"type":1}]}', qr/operations\[0\].*type/ ],
	[ 'items not an array', '{"operations":[{"type":"push","items":{"queue":"x1"}}]}',
	  qr/operations\[0\].*items/ ],
	[ 'a push item without queue', '{"operations":[{"type":"push","items":[{"queue":"x1"},{"payload":1}]}]}',
	  qr/operations\[0\]\.items\[1\].*queue is required/ ],
	[ 'a flat push without queue', '{"operations":[{"type":"push","payload":1}]}',
	  qr/operations\[0\].*queue is required/ ],
	[ 'a control character in a queue name',
	  '{"operations":[{"type":"push","queue":"x1\u0007"}]}', qr/control characters/ ],
	[ 'a control character in a transactionId',
	  '{"operations":[{"type":"push","queue":"x1","transactionId":"a\nb"}]}', qr/control characters/ ],
	[ 'an empty partition', '{"operations":[{"type":"push","queue":"x1","partition":""}]}', qr/partition/ ],
	[ 'a wrong-typed transactionId in an ack',
	  qq({"operations":[{"type":"push","queue":"x1"},{"type":"ack","transactionId":5,"partitionId":"$pid"}]}),
	  qr/operations\[1\].*transactionId/ ],
	[ 'a wrong-typed kv', '{"operations":[{"type":"push","queue":"x1"}],"kv":{}}', qr/kv/ ],
	[ 'a wrong-typed timers', '{"operations":[{"type":"push","queue":"x1"}],"timers":"soon"}', qr/timers/ ],
	[ 'malformed JSON', '{"operations":[', qr/./ ],
);

for my $t (@bad) {
	my ($name, $body, $re) = @$t;
	my ($s, $b) = $q->request('POST', '/api/v1/transaction', $body);
	is($s, 400, "$name: 400");
	like($b->{error} // '', $re, "$name: error names it: " . ($b->{error} // 'none'));
}
my ($s, $b) = $q->get('/api/v1/resources/queues/x1');
is($s, 404, 'none of the refused bundles pushed anything (their valid items neither)');

($s) = $q->get('/api/v1/transaction');
is($s, 405, 'GET: 405');

subtest 'an ack /ack would fail at once rejects the bundle without a 400' => sub {
	$q->push_n('in', 1);
	my (undef, $p) = $q->pop('in');
	my $m = $p->{messages}[0];
	for my $c ([ 'an unknown status', { status => 'done' }, qr/completed, failed, retry or dlq/ ],
		   [ 'a partitionId that is no id', { partitionId => 'p-1' }, qr/partition not found/ ],
		   [ 'no transactionId', { transactionId => undef }, qr/transactionId is required/ ]) {
		my ($name, $over, $re) = @$c;
		my %ack = (type => 'ack', transactionId => $m->{transactionId},
			partitionId => $m->{partitionId}, leaseId => $m->{leaseId}, status => 'completed');
		$ack{$_} = $over->{$_} for keys %$over;
		delete $ack{$_} for grep { !defined $ack{$_} } keys %ack;
		my ($st, $r) = $q->post_json('/api/v1/transaction',
			{ operations => [ { type => 'push', queue => 'x2' }, \%ack ] });
		is($st, 200, "$name: 200");
		is($r->{reason}, 'ack_rejected', "$name: ack_rejected");
		is($r->{failedIndex}, 1, "$name: failedIndex");
		like($r->{ackError} // '', $re, "$name: ackError $r->{ackError}");
	}
	my ($st) = $q->get('/api/v1/resources/queues/x2');
	is($st, 404, 'nothing pushed');
};

subtest 'an empty bundle' => sub {
	my ($st, $r) = $q->post_json('/api/v1/transaction', { operations => [] });
	is($st, 200, 'status 200');
	is_true($r->{success}, 'success');
	is_deeply($r->{results}, [], 'no results');
	like($r->{transactionId} // '', uuid_re, 'a transactionId');
	($st, $r) = $q->post_json('/api/v1/transaction', { operations => [ { type => 'push', items => [] } ] });
	is_true($r->{success}, 'a push of no items: success');
	is_deeply($r->{results}, [], 'no results');
};

subtest 'null means absent' => sub {
	my ($st, $r) = $q->post_json('/api/v1/transaction', { operations => [
		{ type => 'push', queue => 'nulls', partition => undef, transactionId => undef, traceId => undef,
		  items => undef } ], kv => undef, timers => undef, requiredLeases => undef });
	is($st, 200, 'status 200');
	is_true($r->{success}, 'a flat push with null fields commits');
	my (undef, $p) = $q->pop('nulls');
	is($p->{partition}, 'Default', 'to the Default partition');
};

done_testing;
