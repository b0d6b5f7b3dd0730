#!/usr/bin/perl
# Messages (SPEC 12): the list with status dead_letter | completed | processing | pending and
# its filters and paging; one message with payload, status and per-group state; DELETE
# removes dead-letter rows only.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use QueenTest;

start_pg();
my $q = start_queend();

sub list {
	my (%query) = @_;
	my ($s, $b) = $q->get('/api/v1/messages', \%query);
	is($s, 200, 'GET /api/v1/messages?' . join('&', map { "$_=$query{$_}" } sort keys %query));
	return $b // {};
}

sub status_of {
	my ($b) = @_;
	return { map { $_->{transactionId} => $_->{status} } @{ $b->{messages} // [] } };
}

# mq: m0 completed, m1 dead-lettered, m2 under a lease, m3 pending (__QUEUE_MODE__ only).
$q->push_items(map { { queue => 'mq', transactionId => "m$_", payload => { n => $_ },
	traceId => "t$_" } } 0 .. 3);
my ($s, $b) = $q->pop('mq', batch => 1);
$q->ack_all($b);
($s, $b) = $q->pop('mq', batch => 1);
$q->ack_all($b, 'dlq');
my ($s2, $leased) = $q->pop('mq', batch => 1, leaseSeconds => 600);
my $pid = $leased->{partitionId};

subtest 'statuses' => sub {
	my $l = list(queue => 'mq');
	is_deeply(status_of($l), { m0 => 'completed', m1 => 'dead_letter', m2 => 'processing',
		m3 => 'pending' }, 'completed, dead_letter, processing, pending');
	is_deeply(txns($l), [qw(m3 m2 m1 m0)], 'newest first');
	my $m = $l->{messages}[0];
	is($m->{queue}, 'mq', 'queue');
	is($m->{partition}, 'Default', 'partition');
	is($m->{partitionId}, $pid, 'partitionId');
	is($m->{offset}, 3, 'offset');
	like($m->{id}, uuid_re, 'id');
	like($m->{createdAt}, iso_re, 'createdAt');
	is($m->{traceId}, 't3', 'traceId');
	is_deeply($l->{pagination}, { limit => 200, offset => 0 }, 'pagination');
	is_false($l->{hasMore}, 'hasMore false');
	for my $st (qw(completed dead_letter processing pending)) {
		my ($want) = grep { status_of($l)->{$_} eq $st } keys %{ status_of($l) };
		is_deeply(txns(list(queue => 'mq', status => $st)), [$want], "status=$st -> $want");
	}
};

subtest 'completed means every group holding a cursor is past it' => sub {
	# g2 takes a cursor at the start of the log without consuming anything.
	my ($s) = $q->post_json('/api/v1/consumer-groups/g2/queues/mq/seek',
		{ timestamp => '2000-01-01T00:00:00.000Z' });
	is($s, 200, 'g2 holds a cursor at -1');
	is(status_of(list(queue => 'mq'))->{m0}, 'pending', 'm0 is pending again: g2 is not past it');
	$q->post_json('/api/v1/consumer-groups/g2/queues/mq/seek', { toEnd => jtrue });
	is(status_of(list(queue => 'mq'))->{m0}, 'completed', 'completed once g2 is past it');
};

subtest 'filters and paging' => sub {
	$q->push_items(map { { queue => 'mq', partition => 'other', transactionId => "o$_" } } 0 .. 1);
	is_deeply(txns(list(queue => 'mq', partition => 'other')), [qw(o1 o0)], 'partition filter');
	is(scalar @{ list(queue => 'mq')->{messages} }, 6, 'both partitions of mq');
	my $l = list(queue => 'mq', limit => 2);
	is(scalar @{ $l->{messages} }, 2, 'limit 2');
	is_true($l->{hasMore}, 'hasMore');
	my $l2 = list(queue => 'mq', limit => 2, offset => 2);
	is_deeply($l2->{pagination}, { limit => 2, offset => 2 }, 'pagination echoed');
	my %seen = map { $_ => 1 } @{ txns($l) }, @{ txns($l2) };
	is(scalar keys %seen, 4, 'the second page continues the first');
	my $l3 = list(queue => 'mq', limit => 2, offset => 4);
	is_false($l3->{hasMore}, 'the last page says so');
	my $t = $l->{messages}[0]{createdAt};
	is(scalar @{ list(queue => 'mq', to => '2000-01-01T00:00:00.000Z')->{messages} }, 0,
		'to before everything: none');
	is(scalar @{ list(queue => 'mq', from => iso_ms(time + 3600))->{messages} }, 0,
		'from after everything: none');
	ok(scalar(grep { $_ eq $l->{messages}[0]{transactionId} }
		@{ txns(list(queue => 'mq', from => $t, to => $t)) }),
		'from = to = a message\'s createdAt includes it');
	ok(scalar @{ list(status => 'pending')->{messages} } >= 1, 'no queue: every queue');
	for my $bad ([ status => 'done' ], [ from => 'yesterday' ], [ to => 'x' ],
		[ limit => 0 ], [ limit => 1001 ], [ offset => -1 ],
		[ from => '2026-01-02T00:00:00Z', to => '2026-01-01T00:00:00Z' ]) {
		my ($s, $e) = $q->get('/api/v1/messages', { @$bad });
		is($s, 400, "@$bad -> 400");
		ok(length($e->{error} // ''), "error: " . ($e->{error} // ''));
	}
};

subtest 'one message: payload, status and per-group state' => sub {
	my ($s, $m) = $q->get("/api/v1/messages/$pid/m2");
	is($s, 200, 'GET /api/v1/messages/:partitionId/:transactionId');
	is($m->{transactionId}, 'm2', 'transactionId');
	is($m->{offset}, 2, 'offset');
	is_deeply($m->{payload}, { n => 2 }, 'payload');
	is($m->{traceId}, 't2', 'traceId');
	is($m->{status}, 'processing', 'status processing');
	my %g = map { $_->{consumerGroup} => $_ } @{ $m->{groups} // [] };
	is_deeply([ sort keys %g ], [qw(__QUEUE_MODE__ g2)], 'every group with a cursor');
	is($g{__QUEUE_MODE__}{status}, 'processing', '__QUEUE_MODE__ holds it under a lease');
	is_true($g{__QUEUE_MODE__}{leaseActive}, 'lease active');
	is($g{g2}{status}, 'completed', 'g2 is past it');
	($s, $m) = $q->get("/api/v1/messages/$pid/m1");
	is($m->{status}, 'dead_letter', 'm1 dead_letter');
	is($m->{errorMessage}, 'Retries exhausted', 'errorMessage of its newest dead letter');
	is(scalar @{ $m->{deadLetters} }, 1, 'one dead-letter row');
	is($m->{deadLetters}[0]{consumerGroup}, '__QUEUE_MODE__', 'of __QUEUE_MODE__');
	($s, $m) = $q->get("/api/v1/messages/$pid/nope");
	is($s, 404, 'unknown transactionId -> 404');
	is($m->{error}, 'Message not found', 'Message not found');
	($s) = $q->get('/api/v1/messages/not-a-uuid/m1');
	is($s, 404, 'malformed partitionId -> 404');
	($s) = $q->get('/api/v1/messages/00000000-0000-4000-8000-000000000000/m1');
	is($s, 404, 'unknown partition -> 404');
	my ($s3, $pb) = $q->push_items({ queue => 'mq', partition => 'anon' });
	my $apid = list(queue => 'mq', partition => 'anon')->{messages}[0]{partitionId};
	($s, $m) = $q->get("/api/v1/messages/$apid/$pb->[0]{message_id}");
	is($s, 200, 'a message pushed without transactionId answers to its message id');
	is($m->{id}, $pb->[0]{message_id}, 'that one');
};

subtest 'DELETE removes dead-letter rows only' => sub {
	my ($s, $b) = $q->del("/api/v1/messages/$pid/m1");
	is($s, 200, 'DELETE the dead-lettered m1');
	is_true($b->{success}, 'success');
	is($b->{deleted}, 1, 'one dead-letter row deleted');
	my (undef, $d) = $q->get('/api/v1/dlq', { queue => 'mq' });
	is($d->{total}, 0, 'the dead-letter list is empty');
	my (undef, $m) = $q->get("/api/v1/messages/$pid/m1");
	is($m->{status}, 'completed', 'm1 is still in the log, now completed');
	($s, $b) = $q->del("/api/v1/messages/$pid/m3");
	is($s, 200, 'DELETE a message without dead letters');
	is($b->{deleted}, 0, 'deletes nothing: the log is immutable');
	($s) = $q->get("/api/v1/messages/$pid/m3");
	is($s, 200, 'm3 is still there');
	($s, $b) = $q->del("/api/v1/messages/$pid/nope");
	is($s, 404, 'unknown message -> 404');
	is($b->{error}, 'Message not found', 'Message not found');
};

$q->ack_all($leased);
done_testing;
