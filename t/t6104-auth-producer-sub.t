#!/usr/bin/perl
# producerSub (SPEC 17): the sub of the token that pushed a message is stored with it, through
# a push, a transaction, a timer (scheduled alone or in a transaction) and the spool, and is
# returned on pop, message detail and dead-letter reads, and kept by a replay. A producerSub
# the client writes in the body is ignored; without a token there is none.
use strict;
use warnings;
use Test::More;
use QueenTest;
use QueenAuth;

my $pg = start_pg();
my $secret = 'producer-sub-6104-secret';
my $b = start_queend(JWT_ENABLED => 'true', JWT_SECRET => $secret, RETENTION_INTERVAL => 100);
my $now = time;
my %tok = map { $_ => QueenAuth::token('HS256', $secret,
	{ sub => $_, role => 'admin', iat => $now, exp => $now + 3600 }) } qw(alice bob);

sub as {
	my ($who, $method, $path, $body) = @_;
	return $b->request($method, $path, defined $body ? to_json($body) : undef,
		{ Authorization => "Bearer $tok{$who}" });
}

sub pop_all {
	my ($who, $q, %p) = @_;
	my $qs = join '&', map { "$_=$p{$_}" } sort keys %p;
	my ($s, $j) = as($who, 'GET', "/api/v1/pop/queue/$q?batch=100&autoAck=true" .
		($qs ? "&$qs" : ''));
	return $s == 200 ? $j->{messages} : [];
}

# Push: the body's producerSub is ignored.
my ($s, $j) = as('alice', 'POST', '/api/v1/push', { items => [
	{ queue => 'ps-push', payload => { n => 1 }, producerSub => 'mallory' },
	{ queue => 'ps-push', payload => { n => 2 } } ] });
is($s, 201, 'alice pushes two messages');
($s) = as('bob', 'POST', '/api/v1/push', { items => [ { queue => 'ps-push', payload => { n => 3 } } ] });
my $m = pop_all('bob', 'ps-push');
is_deeply([ map { $_->{producerSub} } @$m ], [qw(alice alice bob)],
	'pop returns each message with the sub of the token that pushed it (not the body\'s)');

# Transaction.
my $t = as('bob', 'POST', '/api/v1/transaction', { operations => [
	{ type => 'push', items => [ { queue => 'ps-txn', payload => 1, producerSub => 'x' } ] } ] });
$m = pop_all('alice', 'ps-txn');
is_deeply([ map { $_->{producerSub} } @$m ], ['bob'], 'a transaction push stores its sub');

# Timers, alone and in a transaction.
($s) = as('alice', 'POST', '/api/v1/timers', { operations => [
	{ op => 'schedule', queue => 'ps-timer', timerKey => 'k1', delayMs => 0, txn => 't1',
	  payload => { t => 1 } } ] });
is($s, 200, 'alice schedules a timer');
as('bob', 'POST', '/api/v1/transaction', { operations => [
	{ type => 'push', items => [ { queue => 'ps-other', payload => 0 } ] } ],
	timers => [ { op => 'schedule', queue => 'ps-timer', timerKey => 'k2', delayMs => 0,
		      txn => 't2', payload => { t => 2 } } ] });
my @fired;
wait_until(sub { push @fired, @{ pop_all('alice', 'ps-timer') }; @fired >= 2 }, 15, 0.2);
is_deeply({ map { $_->{transactionId} => $_->{producerSub} } @fired }, { t1 => 'alice', t2 => 'bob' },
	'fired timers carry the sub of who scheduled them');

# The spool: maintenance diverts the push; the drained message keeps its sub.
($s) = as('alice', 'POST', '/api/v1/system/maintenance', { enabled => JSON::PP::true });
($s, $j) = as('bob', 'POST', '/api/v1/push', { items => [ { queue => 'ps-spool', payload => 1 } ] });
is($j->[0]{status}, 'buffered', 'a push during maintenance is buffered');
as('alice', 'POST', '/api/v1/system/maintenance', { enabled => JSON::PP::false });
my @sp;
wait_until(sub { push @sp, @{ pop_all('alice', 'ps-spool') }; @sp >= 1 }, 15, 0.2);
is_deeply([ map { $_->{producerSub} } @sp ], ['bob'], 'a spooled push keeps its sub');

# Dead letters, message detail, replay.
as('bob', 'POST', '/api/v1/push', { items => [ { queue => 'ps-dlq', transactionId => 'd1', payload => 9 } ] });
($s, $j) = as('alice', 'GET', '/api/v1/pop/queue/ps-dlq?batch=1');
my $msg = $j->{messages}[0];
is($msg->{producerSub}, 'bob', 'popped under a lease: producerSub bob');
as('alice', 'POST', '/api/v1/ack', { transactionId => 'd1', partitionId => $msg->{partitionId},
	leaseId => $msg->{leaseId}, status => 'dlq', error => 'poison' });
($s, $j) = as('alice', 'GET', '/api/v1/dlq?queue=ps-dlq');
is($j->{messages}[0]{producerSub}, 'bob', 'the dead letter keeps producerSub');
($s, $j) = as('alice', 'GET', "/api/v1/messages/$msg->{partitionId}/d1");
is($s, 200, 'message detail');
is($j->{producerSub}, 'bob', 'message detail carries producerSub');
my ($dlq) = @{ (as('alice', 'GET', '/api/v1/dlq?queue=ps-dlq'))[1]{messages} };
($s, $j) = as('alice', 'POST', "/api/v1/dlq/$dlq->{id}/replay", {});
is($j->{result}, 'moved', 'replayed');
$m = pop_all('alice', 'ps-dlq');
is_deeply([ map { $_->{producerSub} } @$m ], ['bob'], 'a replay keeps the original producer');
$b->stop;

# Without JWT nothing is stored, whatever the body says.
my $open = start_queend();
$open->push_items({ queue => 'ps-open', payload => 1, producerSub => 'mallory' });
my (undef, $p) = $open->pop('ps-open', autoAck => 'true');
ok(!defined $p->{messages}[0]{producerSub}, 'without a token a message has no producerSub');
is($pg->psql("SELECT count(*) FROM queen_segments WHERE producer_subs IS NOT NULL AND "
	. "'mallory' = ANY (producer_subs)"), 0, 'a client-written producerSub is stored nowhere');

done_testing;
