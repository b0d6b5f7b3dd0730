#!/usr/bin/perl
# Maintenance mode (SPEC 15): every push goes to the on-disk spool and answers "buffered";
# nothing is stored while it is on; switched off, the spool is drained in push order, with
# the message ids the pushes were answered, each message once, and parked pops are woken.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
# A long index resync: a parked pop must be woken by the replay itself.
my $q = start_queend(QUEEN_INDEX_RESYNC_MS => 600000);

sub buffers { my (undef, $b) = $q->get('/api/v1/status/buffers'); $b // {} }

sub maintenance {
	my ($on) = @_;
	my ($s, $b) = $q->post_json('/api/v1/system/maintenance', { enabled => $on ? jtrue : jfalse });
	is($s, 200, 'POST /api/v1/system/maintenance ' . ($on ? 'on' : 'off'));
	return $b;
}

subtest 'the switch' => sub {
	my ($s, $b) = $q->get('/api/v1/system/maintenance');
	is($s, 200, 'GET /api/v1/system/maintenance');
	is_deeply($b, { enabled => jfalse }, 'off at start');
	($s, $b) = $q->post_json('/api/v1/system/maintenance', { enabled => 'yes' });
	is($s, 400, 'enabled must be a boolean');
	like($b->{error} // '', qr/enabled/, 'the error names enabled');
	($s, $b) = $q->post_json('/api/v1/system/maintenance', {});
	is($s, 400, 'enabled is required');
	($s, $b) = $q->get('/api/v1/system/maintenance');
	is_false($b->{enabled}, 'a rejected request changes nothing');
	is_deeply(maintenance(1), { enabled => jtrue }, 'answers the new state');
	($s, $b) = $q->get('/api/v1/system/maintenance');
	is_true($b->{enabled}, 'GET says on');
};

# Pushed during maintenance: [queue, partition, transactionId or undef, payload] in push order.
my @sent;
my %answer;	# "partition/index" -> push answer element

subtest 'pushes are buffered while it is on' => sub {
	my $n = 0;
	for my $req ([ 'p1', 'a-0', 'p1', 'a-1' ], [ 'p2', 'b-0', 'p1', undef, 'p2', 'b-1' ],
		     [ 'p1', 'a-2' ]) {
		my @items;
		for (my $i = 0; $i < @$req; $i += 2) {
			my ($part, $txn) = @$req[$i, $i + 1];
			push @items, { queue => 'mq', partition => $part, payload => { n => $n },
				(defined $txn ? (transactionId => $txn) : ()) };
			push @sent, [ $part, $txn, $n ];
			$n++;
		}
		my ($s, $b) = $q->push_items(@items);
		is($s, 201, 'push answered 201');
		is(ref $b, 'ARRAY', 'with an array') or next;
		is(scalar @$b, scalar @items, 'one element per item');
		for my $i (0 .. $#$b) {
			my $e = $b->[$i];
			is($e->{index}, $i, "index $i");
			is($e->{status}, 'buffered', "item $i buffered");
			like($e->{message_id} // '', uuid_re, 'message_id is a UUIDv7');
			is($e->{queueName}, 'mq', 'queueName');
			my $txn = $items[$i]{transactionId};
			is($e->{transaction_id}, $txn // $e->{message_id},
				'transaction_id: the given one, else the message id');
			$answer{ $items[$i]{payload}{n} } = $e;
		}
	}
	my $b = buffers();
	is($b->{pendingCount}, scalar @sent, 'pendingCount counts every buffered item');
	is($b->{failedCount}, 0, 'failedCount 0');
	is_true($b->{dbHealthy}, 'dbHealthy true: the database is fine');
	my (undef, $m) = $q->get('/metrics');
	is($m->{spool}{pendingCount}, scalar @sent, '/metrics spool.pendingCount');
};

subtest 'nothing is stored while maintenance is on' => sub {
	sleep 1.5;	# several drainer rounds
	is(buffers()->{pendingCount}, scalar @sent, 'still pending');
	my ($s) = $q->pop('mq', partition => 'p1');
	is($s, 204, 'no message to pop');
};

subtest 'switched off, the spool drains in order, each message once, same ids' => sub {
	# A consumer parked on the queue before the switch.
	my $parked = bg(sub {
		my $t0 = time;
		my ($s, $b) = $q->pop('mq', partition => 'p2', wait => 'true', timeout => 30000);
		return { status => $s, took => time - $t0, txns => txns($b) };
	});
	sleep 1;
	maintenance(0);
	my $t0 = time;
	wait_until(sub { buffers()->{pendingCount} == 0 }, 30, 0.1);
	is(buffers()->{pendingCount}, 0, sprintf('drained (%.1f s)', time - $t0));
	my $r = $parked->result(40);
	is($r->{status}, 200, 'the parked pop got messages');
	ok(($r->{took} // 99) < 20, sprintf('woken by the replay (%.1f s), not by its timeout',
		$r->{took} // -1));
	is_deeply($r->{txns}, [ 'b-0', 'b-1' ], 'the messages of p2, in order')
		or diag explain $r;

	for my $part ('p1', 'p2') {
		my @want = grep { $_->[0] eq $part } @sent;
		my ($s, $b) = $q->pop('mq', partition => $part, batch => 100,
			consumerGroup => 'audit', subscriptionMode => 'all');
		is($s, 200, "pop $part");
		my @got = @{ $b->{messages} // [] };
		is_deeply([ map { $_->{data}{n} } @got ], [ map { $_->[2] } @want ],
			"$part: every buffered item once, in push order");
		is_deeply([ map { $_->{id} } @got ], [ map { $answer{ $_->[2] }{message_id} } @want ],
			"$part: with the message ids the pushes were answered");
		is_deeply([ map { $_->{transactionId} } @got ],
			[ map { $answer{ $_->[2] }{transaction_id} } @want ],
			"$part: and their transaction ids");
		$q->ack_all($b);
		($s) = $q->pop('mq', partition => $part, consumerGroup => 'audit');
		is($s, 204, "$part: nothing more");
	}
	my ($s, $b) = $q->push_items({ queue => 'mq', partition => 'p1', transactionId => 'a-3' });
	is($b->[0]{status}, 'queued', 'pushes are stored directly again');
	($s, $b) = $q->push_items({ queue => 'mq', partition => 'p1', transactionId => 'a-0' });
	is($b->[0]{status}, 'duplicate', 'a replayed transactionId deduplicates like a stored one');
	is($b->[0]{message_id}, $answer{0}{message_id}, 'answering the buffered message id');
};

subtest 'a push racing the drain keeps its place behind the spool' => sub {
	maintenance(1);
	my @t = map { "r-$_" } 0 .. 19;
	$q->push_items(map { { queue => 'race', transactionId => $_ } } @t[0 .. 9]);
	maintenance(0);
	# These land while the drainer works (buffered) or after it (queued): either way after
	# the first ten.
	for my $t (@t[10 .. 19]) {
		my (undef, $b) = $q->push_items({ queue => 'race', transactionId => $t });
		like($b->[0]{status} // '', qr/^(buffered|queued)$/, "$t: $b->[0]{status}");
	}
	wait_until(sub { buffers()->{pendingCount} == 0 }, 30, 0.1);
	my ($s, $b) = $q->pop('race', batch => 100);
	is_deeply(txns($b), \@t, 'one partition, push order kept');
};

done_testing;
