#!/usr/bin/perl
# Long-poll (SPEC 5, 21): wait=true parks until a push makes data deliverable -- woken at
# once, not at the next poll -- or until timeout, then 204. Parked pops hold no database
# connection. (How fast exactly is the benchmark's business; here: well under a second.)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

# Starts a long-poll in a child: GET $path with %query; the result carries status, body and
# the time the answer arrived.
sub park {
	my ($b, $path, %query) = @_;
	return bg(sub {
		my ($s, $j) = $b->get($path, { wait => 'true', timeout => 10000, %query });
		return { status => $s, body => $j, at => time };
	});
}

# Gives a child the moment it needs to send its request and park. A push that arrives before
# the park still passes the test (the pop then finds data), it just measures less.
sub settle { sleep 0.5 }

sub woken_by {
	my ($what, $lp, @items) = @_;
	settle();
	my $t_push = time;
	my ($s, $b) = $q->push_items(@items);
	is($s, 201, "$what: pushed");
	my $r = $lp->result(15);
	is($r->{status}, 200, "$what: the parked pop answered 200") or diag(explain $r);
	my $lat = ($r->{at} // 1e9) - $t_push;
	ok($lat < 1.0, sprintf('%s: woken %.0f ms after the push', $what, $lat * 1000));
	return $r->{body};
}

$q->push_n('lp', 1);
my ($s, $b) = $q->pop('lp');
$q->ack_all($b);

subtest 'a parked pop is woken by a push' => sub {
	my $lp = park($q, '/api/v1/pop/queue/lp');
	my $got = woken_by('lp', $lp, { queue => 'lp', transactionId => 'wake-1' });
	is_deeply(txns($got), ['wake-1'], 'with the pushed message');
};

subtest 'a pop parked on a queue that does not exist yet is woken by the push creating it' => sub {
	my $lp = park($q, '/api/v1/pop/queue/brand-new');
	my $got = woken_by('brand-new', $lp, { queue => 'brand-new', transactionId => 'first-ever' });
	is_deeply(txns($got), ['first-ever'], 'with the pushed message');
};

subtest 'a named new group parked before anything is pushed gets the push' => sub {
	my $lp = park($q, '/api/v1/pop/queue/lp', consumerGroup => 'late');
	my $got = woken_by('group late', $lp, { queue => 'lp', transactionId => 'wake-2' });
	is_deeply(txns($got), ['wake-2'], 'with the pushed message');
};

subtest 'a pop parked on one partition is not answered by another partition\'s push' => sub {
	my $lp = park($q, '/api/v1/pop/queue/lp/partition/pz');
	settle();
	$q->push_items({ queue => 'lp', partition => 'elsewhere', transactionId => 'not-for-pz' });
	my $got = woken_by('partition pz', $lp, { queue => 'lp', partition => 'pz', transactionId => 'for-pz' });
	is_deeply(txns($got), ['for-pz'], 'only the pz message');
};

subtest 'a pop parked on the discovery route wakes on a matching queue' => sub {
	my $lp = park($q, '/api/v1/pop', namespace => 'lpns');
	my $got = woken_by('namespace lpns', $lp, { queue => 'lpns.task.q', transactionId => 'disc' });
	is_deeply(txns($got), ['disc'], 'with the pushed message');
	is($got->{messages}[0]{queue}, 'lpns.task.q', 'naming its queue');
};

# A consumer holds the only partition of a queue with data, another parks on it; the first
# gives the message back (an ack that fails it, through $how), which releases its lease: the
# parked pop is woken with the message, not left to its next recheck.
sub woken_by_release {
	my ($queue, $how) = @_;
	$q->push_items({ queue => $queue, transactionId => "$queue-1" });
	my (undef, $held) = $q->pop($queue);
	is_deeply(txns($held), ["$queue-1"], "$queue: the first consumer holds the message");
	my $lp = park($q, "/api/v1/pop/queue/$queue");
	settle();
	my $t_ack = time;
	$how->($held->{messages}[0]);
	my $r = $lp->result(15);
	is($r->{status}, 200, "$queue: the parked pop answered 200") or diag(explain $r);
	is_deeply(txns($r->{body}), ["$queue-1"], "$queue: with the message given back");
	my $lat = ($r->{at} // 1e9) - $t_ack;
	ok($lat < 0.5, sprintf('%s: woken %.0f ms after the lease was released', $queue, $lat * 1000));
}

subtest 'a parked pop is woken when an ack releases a lease' => sub {
	woken_by_release('rel-ack', sub {
		my $m = shift;
		my ($s) = $q->ack_batch(undef, { transactionId => $m->{transactionId},
			partitionId => $m->{partitionId}, leaseId => $m->{leaseId}, status => 'failed' });
		is($s, 200, 'rel-ack: failed by /ack/batch');
	});
	woken_by_release('rel-txn', sub {
		my $m = shift;
		my $r = $q->transaction({ operations => [ { type => 'ack',
			transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
			leaseId => $m->{leaseId}, status => 'failed' } ] }, 'rel-txn: failed by a transaction');
		is_true($r->{success}, 'rel-txn: committed');
	});
};

subtest 'timeout: 204 at the deadline' => sub {
	my $t0 = time;
	my ($s, undef, undef, $raw) = $q->pop('quiet', wait => 'true', timeout => 700);
	my $took = time - $t0;
	is($s, 204, 'nothing came: 204');
	is($raw, '', 'no body');
	ok($took >= 0.6 && $took < 5, sprintf('after the 700 ms timeout (%.2f s)', $took));
};

subtest 'parked pops hold no database connection' => sub {
	my $small = start_queend(DB_POOL_SIZE => 2);
	my @lps = map { park($small, "/api/v1/pop/queue/idle-$_") } 1 .. 6;
	settle();
	my $t0 = time;
	my ($s, $b) = $small->push_items(map { +{ queue => "idle-$_", transactionId => "idle-$_" } } 1 .. 6);
	is($s, 201, sprintf('a push with 6 pops parked on a pool of 2 is served (%.2f s)', time - $t0));
	my @res = map { $_->result(15) } @lps;
	is_deeply([ map { $_->{status} } @res ], [ (200) x 6 ], 'and every parked pop is woken');
	is_deeply([ map { txns($_->{body})->[0] } @res ], [ map { "idle-$_" } 1 .. 6 ],
		'each with its own message');
};

subtest 'a queue relabelled by configure wakes the discovery pops of its new labels' => sub {
	# The index learns the labels at its resync; it kept a known queue's old ones, so a
	# push woke nobody and the pop saw the message at its next recheck, a second later.
	my $r = start_queend(QUEEN_INDEX_RESYNC_MS => 200, LOG_LEVEL => 'debug');
	$r->push_items({ queue => 'relabel', transactionId => 'old' });
	my ($s, $b) = $r->pop('relabel');
	$r->ack_all($b);
	my $before = $r->log_count(qr/index sweep:/);
	($s) = $r->post_json('/api/v1/configure',
		{ queue => 'relabel', namespace => 'billing', task => 'invoice' });
	is($s, 200, 'configured with namespace billing');
	# Two reloads of the index end after the configure: the second began after it. (A
	# reload is timed at 20 times what the last took when that is longer than the interval,
	# so under the sanitizers a fixed 1 or 2 s could hold none.)
	ok(wait_until(sub { $r->log_count(qr/index sweep:/) >= $before + 2 }, 30),
		'the index was reloaded since') or diag($r->log_tail);
	my $lp = park($r, '/api/v1/pop', namespace => 'billing');
	settle();
	my $t_push = time;
	$r->push_items({ queue => 'relabel', transactionId => 'new' });
	my $got = $lp->result(15);
	is_deeply(txns($got->{body}), ['new'], 'the parked pop gets the push');
	my $lat = ($got->{at} // 1e9) - $t_push;
	ok($lat < 0.5, sprintf('woken %.0f ms after it, not at its next recheck', $lat * 1000));
	$r->stop;
};

done_testing;
