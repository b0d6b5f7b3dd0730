#!/usr/bin/perl
# Dead letters (SPEC 11): purge by queue and group; replay as a move (push again with
# transactionId dlq:<row id>, delete the row) that is harmless when repeated, can redirect,
# and wakes parked consumers; retry by message address.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use QueenTest;

start_pg();
my $q = start_queend();

# Pushes @items to $queue, then dead-letters each one for $group (status dlq); returns the
# popped messages.
sub make_dead {
	my ($queue, $group, @items) = @_;
	$q->push_items(map { { queue => $queue, %$_ } } @items) if @items;
	my @dead;
	while (1) {
		my ($s, $b) = $q->pop($queue, batch => 1, subscriptionMode => 'all',
			(defined $group ? (consumerGroup => $group) : ()),
			(defined $items[0]{partition} ? (partition => $items[0]{partition}) : ()));
		last unless $s == 200;
		$q->ack_all($b, 'dlq');
		push @dead, $b->{messages}[0];
	}
	return @dead;
}

sub dlq_rows {
	my (%query) = @_;
	my ($s, $b) = $q->get('/api/v1/dlq', \%query);
	return $b // {};
}

sub replay {
	my ($id, $body) = @_;
	return $q->request('POST', "/api/v1/dlq/$id/replay", defined $body ? to_json($body) : undef);
}

subtest 'purge by queue, and by queue and group' => sub {
	make_dead('dq1', undef, map { { transactionId => "q$_" } } 0 .. 1);
	make_dead('dq1', 'gx');
	make_dead('dq2', undef, { transactionId => 'z' });
	is(dlq_rows(queue => 'dq1')->{total}, 4, 'dq1: 2 of __QUEUE_MODE__ and 2 of gx');
	my ($s, $b) = $q->del('/api/v1/dlq', { queue => 'dq1', consumerGroup => 'gx' });
	is($s, 200, 'DELETE /api/v1/dlq?queue=dq1&consumerGroup=gx');
	is_true($b->{success}, 'success');
	is($b->{deleted}, 2, 'deleted 2');
	is(dlq_rows(queue => 'dq1', consumerGroup => 'gx')->{total}, 0, 'gx has none left');
	is(dlq_rows(queue => 'dq1')->{total}, 2, 'the other group\'s rows stay');
	($s, $b) = $q->del('/api/v1/dlq', { queue => 'dq1' });
	is($b->{deleted}, 2, 'DELETE by queue deletes the rest');
	is(dlq_rows(queue => 'dq1')->{total}, 0, 'dq1 is empty');
	is(dlq_rows(queue => 'dq2')->{total}, 1, 'dq2 is untouched');
	($s, $b) = $q->del('/api/v1/dlq', { queue => 'nosuchqueue' });
	is($s, 200, 'unknown queue: 200');
	is($b->{deleted}, 0, 'deleted 0');
	($s, $b) = $q->del('/api/v1/dlq');
	is($s, 400, 'no queue -> 400');
	like($b->{error} // '', qr/queue/, 'naming queue');
	($s) = $q->del('/api/v1/dlq', { queue => '' });
	is($s, 400, 'empty queue -> 400');
	is(dlq_rows(queue => 'dq2')->{total}, 1, 'the rejected purges deleted nothing');
};

subtest 'replay moves the message back and removes the row' => sub {
	make_dead('rp', undef, { transactionId => 'orig', payload => { k => 'v' }, traceId => 'tr-1' });
	my $row = dlq_rows(queue => 'rp')->{messages}[0];
	my ($s, $b) = replay($row->{id});
	is($s, 200, 'POST /api/v1/dlq/:id/replay');
	is_true($b->{success}, 'success');
	is($b->{result}, 'moved', 'result moved');
	is_true($b->{dlqRowRemoved}, 'dlqRowRemoved');
	my $el = $b->{replayedAs} // {};
	is($el->{index}, 0, 'replayedAs is a push element: index');
	like($el->{message_id} // '', uuid_re, 'message_id');
	is($el->{transaction_id}, "dlq:$row->{id}", 'transaction_id dlq:<row id>');
	is($el->{queueName}, 'rp', 'queueName');
	is($el->{status}, 'queued', 'status queued');
	is(dlq_rows(queue => 'rp')->{total}, 0, 'the row is gone');
	($s, $b) = $q->pop('rp');
	is($s, 200, 'the queue delivers it again');
	my $m = $b->{messages}[0] // {};
	is($m->{transactionId}, "dlq:$row->{id}", 'under the new transactionId');
	is($m->{id}, $el->{message_id}, 'with the new message id');
	is_deeply($m->{data}, { k => 'v' }, 'the payload');
	is($m->{traceId}, 'tr-1', 'the traceId');
	is($m->{offset}, 1, 'appended at the end of the log');
	$q->ack_all($b);

	($s, $b) = replay($row->{id});
	is($s, 404, 'replaying it again: 404');
	is($b->{result}, 'gone', 'result gone');
	is_false($b->{success}, 'success false');
	is($b->{error}, 'Dead letter not found', 'error');
	($s, $b) = replay('not-a-uuid');
	is($s, 404, 'a malformed id: 404');
	is($b->{result}, 'gone', 'result gone');
};

subtest 'a repeated replay is a duplicate and keeps the row' => sub {
	make_dead('rd', undef, { transactionId => 'x' });
	my $row = dlq_rows(queue => 'rd')->{messages}[0];
	# As if an earlier replay had stored the push but its answer was lost.
	my ($s, $p) = $q->push_items({ queue => 'rd', transactionId => "dlq:$row->{id}",
		payload => 1 });
	my $b;
	($s, $b) = replay($row->{id});
	is($s, 200, 'replay');
	is($b->{result}, 'duplicate', 'result duplicate');
	is_false($b->{dlqRowRemoved}, 'dlqRowRemoved false');
	is($b->{replayedAs}{status}, 'duplicate', 'the push element says duplicate');
	is($b->{replayedAs}{message_id}, $p->[0]{message_id}, 'with the original message id');
	is(dlq_rows(queue => 'rd')->{total}, 1, 'the row is kept');
	($s, $b) = $q->pop('rd', batch => 10);
	is_deeply(txns($b), ["dlq:$row->{id}"], 'the message is in the queue once');
};

subtest 'replay can redirect to another queue and partition' => sub {
	make_dead('rr', undef, map { { partition => 'orig', transactionId => "r$_" } } 0 .. 2);
	my @rows = @{ dlq_rows(queue => 'rr')->{messages} };
	is(scalar @rows, 3, 'three dead letters');
	my ($s, $b) = replay($rows[0]{id}, { queue => 'rr-fix', partition => 'p9' });
	is($b->{result}, 'moved', 'moved');
	is($b->{replayedAs}{queueName}, 'rr-fix', 'to rr-fix');
	($s, $b) = $q->pop('rr-fix', partition => 'p9');
	is_deeply(txns($b), ["dlq:$rows[0]{id}"], 'rr-fix/p9 delivers it');
	($s, $b) = replay($rows[1]{id}, { queue => 'rr-fix2' });
	is($b->{result}, 'moved', 'a queue alone');
	($s, $b) = $q->pop('rr-fix2', partition => 'orig');
	is_deeply(txns($b), ["dlq:$rows[1]{id}"], 'keeps the original partition name');
	for my $bad ([ '{"queue":5}', 'a number' ], [ '{"queue":""}', 'an empty queue' ],
		[ '[1]', 'not an object' ], [ '{"partition":"a\u0001b"}', 'a control character' ],
		[ '{"queue":', 'malformed JSON' ]) {
		($s, $b) = $q->request('POST', "/api/v1/dlq/$rows[2]{id}/replay", $bad->[0]);
		is($s, 400, "$bad->[1] -> 400");
	}
	is(dlq_rows(queue => 'rr')->{total}, 1, 'the rejected replays left the row');
};

subtest 'retry by message address replays the newest row there' => sub {
	$q->push_items({ queue => 'rt', transactionId => 'rt-0' });
	make_dead('rt', 'ga');
	make_dead('rt', 'gb');
	my @rows = @{ dlq_rows(queue => 'rt')->{messages} };
	is(scalar @rows, 2, 'rt-0 dead-lettered by two groups');
	my $pid = $rows[0]{partitionId};
	my ($s, $b) = $q->request('POST', "/api/v1/messages/$pid/rt-0/retry");
	is($s, 200, 'POST /api/v1/messages/:partitionId/:transactionId/retry');
	is($b->{result}, 'moved', 'moved');
	is($b->{dlqId}, $rows[0]{id}, 'the newest row');
	my $left = dlq_rows(queue => 'rt')->{messages};
	is_deeply([ map { $_->{id} } @$left ], [ $rows[1]{id} ], 'the older row remains');
	($s, $b) = $q->request('POST', "/api/v1/messages/$pid/rt-0/retry");
	is($b->{result}, 'moved', 'a second retry moves the other one');
	($s, $b) = $q->request('POST', "/api/v1/messages/$pid/rt-0/retry");
	is($s, 404, 'then there is none: 404');
	is($b->{result}, 'gone', 'gone');
	($s) = $q->request('POST', "/api/v1/messages/$pid/nosuchtxn/retry");
	is($s, 404, 'unknown transactionId: 404');
	($s) = $q->request('POST', '/api/v1/messages/not-a-uuid/rt-0/retry');
	is($s, 404, 'malformed partitionId: 404');
};

subtest 'a replay wakes a parked consumer' => sub {
	make_dead('wk', undef, { transactionId => 'w0' });
	my $row = dlq_rows(queue => 'wk')->{messages}[0];
	my $lp = bg(sub {
		my ($s, $b) = $q->pop('wk', wait => 'true', timeout => 30000);
		return { status => $s, txns => txns($b), at => time };
	});
	ok(wait_until(sub { ((($q->get('/metrics'))[1] // {})->{longPoll}{parked} // 0) >= 1 }, 20),
		'a pop is parked on wk');
	my $t0 = time;
	my ($s, $b) = replay($row->{id});
	is($b->{result}, 'moved', 'replayed');
	my $r = $lp->result(45);
	is($r->{status}, 200, 'the parked pop answered with the message') or diag(explain $r);
	is_deeply($r->{txns}, ["dlq:$row->{id}"], 'the replayed message');
	ok(($r->{at} // 1e9) - $t0 < 10, sprintf('woken by the replay (%.2f s)',
		($r->{at} // 1e9) - $t0));
};

done_testing;
