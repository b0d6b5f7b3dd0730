#!/usr/bin/perl
# A payload holding \u0000 (SPEC 22): stored and read back exactly on every read path -- pop,
# the dead-letter list, message detail, replay -- and never breaking a later read of other
# data. Before, PostgreSQL's jsonb refused it once dead-lettered: every GET /api/v1/dlq page
# holding it failed, and its message detail too. Message detail carries the payload as both
# data and payload (SPEC 21).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

my $nul = { s => "a\x{0}b", nested => [ "\x{0}", { k => "x\x{0}" } ] };
my ($s, $b) = $q->push_items({ queue => 'nul', transactionId => 'nul-1', payload => $nul },
	{ queue => 'nul', transactionId => 'plain-1', payload => { ok => 1 } });
is($s, 201, 'pushed a payload holding \u0000 and a plain one');

($s, $b) = $q->pop('nul', batch => 10);
is($s, 200, 'popped');
is_deeply($b->{messages}[0]{data}, $nul, 'pop returns the payload exactly');
my $pid = $b->{messages}[0]{partitionId};
($s) = $q->ack_batch(undef, map { { transactionId => $_->{transactionId}, partitionId => $pid,
	leaseId => $_->{leaseId}, status => 'dlq', error => 'test' } } $b->{messages}[0]);
is($s, 200, 'the \u0000 message is dead-lettered');
($s, $b) = $q->pop('nul');
$q->ack_batch(undef, map { { transactionId => $_->{transactionId}, partitionId => $pid,
	leaseId => $_->{leaseId}, status => 'dlq', error => 'test' } } @{ $b->{messages} // [] });

($s, $b) = $q->get('/api/v1/dlq', { queue => 'nul' });
is($s, 200, 'GET /api/v1/dlq with the \u0000 payload on the page: 200 (was 503)');
my %by = map { $_->{transactionId} => $_ } @{ $b->{messages} // [] };
is($b->{total}, 2, 'both dead letters counted');
is_deeply($by{'nul-1'}{data}, $nul, 'the dead letter carries the payload exactly');
is_deeply($by{'plain-1'}{data}, { ok => 1 }, 'and the other dead letter is readable too');
is($by{'nul-1'}{errorMessage}, 'test', 'with its error');

($s, $b) = $q->get("/api/v1/messages/$pid/nul-1");
is($s, 200, 'message detail of the \u0000 message: 200 (was 503)');
is_deeply($b->{data}, $nul, 'it carries the payload as data');
is_deeply($b->{payload}, $nul, 'and as payload');
is($b->{status}, 'dead_letter', 'dead-lettered');

($s, $b) = $q->get("/api/v1/messages/$pid/plain-1");
is($s, 200, 'the detail of another message');
is_deeply($b->{data}, { ok => 1 }, 'carries data');

($s, $b) = $q->post_json("/api/v1/messages/$pid/nul-1/retry", {});
is($s, 200, 'replaying the \u0000 dead letter');
is($b->{result}, 'moved', 'moves it');
($s, $b) = $q->pop('nul');
is($s, 200, 'popped again');
is_deeply($b->{messages}[0]{data}, $nul, 'still exactly the payload');

done_testing();
