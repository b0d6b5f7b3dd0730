#!/usr/bin/perl
# Timers (SPEC 14): a scheduled timer pushes its payload to its queue after delayMs, as a
# message carrying the promised messageId and txn; scheduling the same key again replaces the
# timer; cancel answers cancelled or absent (POST and DELETE); peek and list show what is
# pending, and an unknown timer is a 404.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

sub timers {
	my (@ops) = @_;
	my ($s, $b) = $q->post_json('/api/v1/timers', { operations => \@ops });
	is($s, 200, 'POST /api/v1/timers answers 200') or diag(explain $b);
	return $b->{results} // [];
}

sub schedule {
	my (%o) = @_;
	return timers({ op => 'schedule', %o })->[0] // {};
}

sub seg { my $s = shift; $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge; $s }

sub peek {
	my ($queue, $key) = @_;
	my $path = join('/', map { seg($_) } split m{/}, $key);
	return $q->get('/api/v1/timers/' . seg($queue) . '/' . $path);
}

# Pops every message of $queue that arrives within $timeout seconds until $n have come.
sub collect {
	my ($queue, $n, $timeout, %p) = @_;
	my @got;
	wait_until(sub {
		my ($s, $b) = $q->pop($queue, batch => 100, autoAck => 'true', %p);
		push @got, @{ $b->{messages} } if $s == 200;
		return @got >= $n;
	}, $timeout // 30, 0.1);
	return \@got;
}

sub total_messages {
	my $queue = shift;
	my ($s, $b) = $q->get('/api/v1/resources/queues/' . seg($queue));
	return $s == 200 ? $b->{totals}{messages} : 0;
}

subtest 'a scheduled timer delivers its payload with the promised id and txn' => sub {
	my $t0 = time;
	my $r = schedule(queue => 'tq', timerKey => 'saga:1', delayMs => 1500, txn => 'comp-1',
		payload => { orderId => 9137, tags => ['a', 'b'] });
	is_true($r->{ok}, 'ok');
	is($r->{status}, 'scheduled', 'status scheduled');
	is($r->{queue}, 'tq', 'queue');
	is($r->{timerKey}, 'saga:1', 'timerKey');
	is($r->{txn}, 'comp-1', 'txn as given');
	like($r->{messageId} // '', uuid_re, 'messageId is a UUIDv7');
	like($r->{deliverAt} // '', iso_re, 'deliverAt is an ISO timestamp');
	my $due = iso_epoch($r->{deliverAt}) // 0;
	ok($due >= $t0 + 1.5 - 5 && $due <= time + 1.5 + 5,
		'deliverAt is about delayMs from now');

	my ($s, $pk) = peek('tq', 'saga:1');
	is($s, 200, 'peek finds the pending timer');
	is_deeply($pk->{payload}, { orderId => 9137, tags => ['a', 'b'] }, 'with its payload');
	is($pk->{messageId}, $r->{messageId}, 'and the promised id');

	my $got = collect('tq', 1, 30);
	is(scalar @$got, 1, 'one message arrived');
	my $m = $got->[0] // {};
	is($m->{id}, $r->{messageId}, 'the message carries the promised messageId');
	is($m->{transactionId}, 'comp-1', 'and the txn as transactionId');
	is($m->{partition}, 'Default', 'in partition Default');
	is_deeply($m->{data}, { orderId => 9137, tags => ['a', 'b'] }, 'payload delivered as is');
	ok((iso_epoch($m->{createdAt}) // 0) >= $due - 0.001, 'not before deliverAt');
	is((peek('tq', 'saga:1'))[0], 404, 'a fired timer is no longer pending');
};

subtest 'txn defaults to the promised message id; partition and any JSON payload' => sub {
	my $r = schedule(queue => 'tq2', timerKey => 'k', partition => 'p-7', delayMs => 0,
		payload => 'just a string');
	is($r->{txn}, $r->{messageId}, 'txn defaults to messageId');
	my $m = collect('tq2', 1, 30, partition => 'p-7')->[0] // {};
	is($m->{id}, $r->{messageId}, 'delivered with that id');
	is($m->{transactionId}, $r->{messageId}, 'and that transactionId');
	is($m->{partition}, 'p-7', 'to the named partition');
	is($m->{data}, 'just a string', 'a string payload');

	$r = schedule(queue => 'tq2', timerKey => 'nopayload', delayMs => 0);
	$m = collect('tq2', 1, 30)->[0] // {};
	is($m->{id}, $r->{messageId}, 'a timer without payload is delivered');
	is_null($m, 'data', 'with data null');
};

subtest 'scheduling the same key again replaces the timer' => sub {
	my $a = schedule(queue => 'rq', timerKey => 'once', delayMs => 600000, payload => 'old');
	is_false($a->{replaced}, 'first schedule is not a replacement');
	my $b = schedule(queue => 'rq', timerKey => 'once', delayMs => 0, payload => 'new',
		txn => 'new-txn');
	is_true($b->{replaced}, 'second one replaces it');
	isnt($b->{messageId}, $a->{messageId}, 'with a new promised id');
	my $m = collect('rq', 1, 30)->[0] // {};
	is($m->{id}, $b->{messageId}, 'the replacement fires');
	is($m->{data}, 'new', 'with its payload');
	is($m->{transactionId}, 'new-txn', 'and its txn');
	is((peek('rq', 'once'))[0], 404, 'nothing of the old timer is left pending');
	my ($s, $l) = $q->get('/api/v1/timers/rq');
	is_deeply($l->{timers}, [], 'the queue lists no pending timer');
	is(total_messages('rq'), 1, 'and holds exactly one message');
};

subtest 'cancel: cancelled, then absent; a cancelled timer never fires' => sub {
	my $doomed = schedule(queue => 'cq', timerKey => 'doomed', delayMs => 1500, payload => 1);
	schedule(queue => 'cq', timerKey => 'sentinel', delayMs => 2500, payload => 2);
	my $r = timers({ op => 'cancel', queue => 'cq', timerKey => 'doomed' })->[0] // {};
	is_true($r->{ok}, 'cancel ok');
	is($r->{status}, 'cancelled', 'status cancelled');
	is($r->{queue}, 'cq', 'queue');
	is($r->{timerKey}, 'doomed', 'timerKey');
	$r = timers({ op => 'cancel', queue => 'cq', timerKey => 'doomed' })->[0] // {};
	is($r->{status}, 'absent', 'cancelling again: absent');
	# Timers fire in due order: once the later sentinel is delivered, the cancelled one
	# would have been too.
	my $got = collect('cq', 1, 30);
	is_deeply([map { $_->{data} } @$got], [2], 'only the sentinel was delivered');
	is(total_messages('cq'), 1, 'the queue holds one message');
};

subtest 'DELETE /api/v1/timers/:queue/*timerKey cancels, keys may hold slashes' => sub {
	schedule(queue => 'dq', timerKey => 'saga/9137/step-2', delayMs => 600000, payload => {});
	my ($s, $pk) = peek('dq', 'saga/9137/step-2');
	is($s, 200, 'peek a key with slashes');
	is($pk->{timerKey}, 'saga/9137/step-2', 'the whole key');
	my $b;
	($s, $b) = $q->del('/api/v1/timers/dq/saga/9137/step-2');
	is($s, 200, 'DELETE answers 200');
	is($b->{status}, 'cancelled', 'cancelled');
	is_true($b->{ok}, 'ok');
	($s, $b) = $q->del('/api/v1/timers/dq/saga/9137/step-2');
	is($s, 200, 'DELETE again answers 200');
	is($b->{status}, 'absent', 'absent');
	is((peek('dq', 'saga/9137/step-2'))[0], 404, 'gone');
};

subtest 'peek and list' => sub {
	my ($s, $b) = peek('nq', 'nothing');
	is($s, 404, 'unknown timer: 404');
	is($b->{error}, 'Timer not found', 'says so');

	my %ids;
	for my $k (qw(e c a d b)) {
		my $r = schedule(queue => 'lq', timerKey => "k-$k", delayMs => 3600000,
			payload => { k => $k }, partition => 'P');
		$ids{"k-$k"} = $r->{messageId};
	}
	($s, $b) = peek('lq', 'k-c');
	is($s, 200, 'peek 200');
	is($b->{queue}, 'lq', 'queue');
	is($b->{timerKey}, 'k-c', 'timerKey');
	is($b->{partition}, 'P', 'partition');
	is($b->{messageId}, $ids{'k-c'}, 'messageId');
	is($b->{txn}, $ids{'k-c'}, 'txn');
	like($b->{deliverAt}, iso_re, 'deliverAt');
	is($b->{attempts}, 0, 'no failed attempt');
	is_deeply($b->{payload}, { k => 'c' }, 'payload');
	schedule(queue => 'lq2', timerKey => 'nul', delayMs => 3600000,
		payload => { s => "a\x{0}b" });
	($s, $b) = peek('lq2', 'nul');
	is($s, 200, 'peek a payload jsonb could not hold');
	is($b->{payload}{s}, "a\x{0}b", 'a NUL character survives');

	($s, $b) = $q->get('/api/v1/timers/lq', { limit => 2 });
	is($s, 200, 'list 200');
	is_deeply([map { $_->{timerKey} } @{ $b->{timers} }], ['k-a', 'k-b'], 'first page by key');
	is_true($b->{truncated}, 'truncated');
	is($b->{nextAfter}, 'k-b', 'nextAfter');
	is($b->{timers}[0]{messageId}, $ids{'k-a'}, 'entries carry their messageId');
	($s, $b) = $q->get('/api/v1/timers/lq', { limit => 2, after => $b->{nextAfter} });
	is_deeply([map { $_->{timerKey} } @{ $b->{timers} }], ['k-c', 'k-d'], 'second page');
	($s, $b) = $q->get('/api/v1/timers/lq', { limit => 2, after => $b->{nextAfter} });
	is_deeply([map { $_->{timerKey} } @{ $b->{timers} }], ['k-e'], 'last page');
	is_false($b->{truncated}, 'not truncated');
	is_null($b, 'nextAfter', 'no nextAfter on the last page');
	($s, $b) = $q->get('/api/v1/timers/lq');
	is(scalar @{ $b->{timers} }, 5, 'default limit lists all five');
	($s, $b) = $q->get('/api/v1/timers/empty-queue');
	is($s, 200, 'a queue without timers: 200');
	is_deeply($b->{timers}, [], 'empty list');
	for my $bad ('0', '1001', 'x') {
		($s, $b) = $q->get('/api/v1/timers/lq', { limit => $bad });
		is($s, 400, "limit=$bad: 400");
		is($b->{code}, 'timers_bad_request', 'code timers_bad_request');
	}
};

subtest 'one call schedules and cancels in order' => sub {
	my $res = timers(
		{ op => 'schedule', queue => 'mq', timerKey => 'a', delayMs => 600000 },
		{ op => 'schedule', queue => 'mq', timerKey => 'b', delayMs => 600000 },
		{ op => 'cancel', queue => 'mq', timerKey => 'a' },
		{ op => 'cancel', queue => 'mq', timerKey => 'zzz' });
	is_deeply([map { $_->{status} } @$res], [qw(scheduled scheduled cancelled absent)],
		'one result per operation, in order');
	my ($s, $b) = $q->get('/api/v1/timers/mq');
	is_deeply([map { $_->{timerKey} } @{ $b->{timers} }], ['b'], 'b is pending');
	($s, $b) = $q->post_json('/api/v1/timers', { operations => [] });
	is($s, 200, 'no operations: 200');
	is_deeply($b, { results => [] }, 'no results');
};

done_testing();
