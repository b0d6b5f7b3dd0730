#!/usr/bin/perl
# Long-polls cost what they are worth (SPEC 22): a parked pop re-runs its query at most once
# per wake and once per recheck interval, never in a loop; QUEEN_MAX_LONGPOLLS caps them with
# 429 + Retry-After; one whose client went away is released within a second; a wake reaches
# every queue a push touched, however many. Query counts come from /metrics (popQueries).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend(QUEEN_MAX_LONGPOLLS => 3);

sub lp { my ($s, $m) = $q->get('/metrics'); return $m->{longPoll} // {} }
sub parked { lp()->{parked} // -1 }
sub queries { lp()->{popQueries} // 0 }

sub park {
	my ($path, %query) = @_;
	return bg(sub {
		my ($s, $j, $h) = $q->get($path, { wait => 'true', timeout => 10000, %query });
		return { status => $s, body => $j, retry => $h->{'retry-after'}, at => time };
	});
}

sub until_parked {
	my ($n) = @_;
	ok(wait_until(sub { parked() == $n }, 10), "$n parked") or diag(explain lp());
}

subtest 'a parked discovery pop does not re-run its query in a loop under push traffic' => sub {
	my $before = queries();
	my $lp = park('/api/v1/pop', namespace => 'quiet', timeout => 3000);
	until_parked(1);
	# Pushes to another namespace, back to back, while the pop is parked: each moved the
	# one generation all discovery pops read, so the pop re-ran its query in a loop.
	my $pusher = bg(sub {
		my $n = 0;
		my $end = time + 2.5;
		while (time < $end) {
			$q->push_items({ queue => 'busy.traffic', payload => { n => $n++ } });
		}
		return $n;
	});
	my $pushed = $pusher->result(30);
	my $r = $lp->result(15);
	is($r->{status}, 204, 'the discovery pop ends with 204 at its deadline');
	my $ran = queries() - $before;
	ok($ran <= 6, "its query ran $ran times in 3 s while $pushed pushes went elsewhere");
};

subtest 'a pop parked on an unknown queue does not re-query every second' => sub {
	my $before = queries();
	my $lp = park('/api/v1/pop/queue/never-pushed', timeout => 3500);
	is($lp->result(15)->{status}, 204, '204 at the deadline');
	my $ran = queries() - $before;
	ok($ran <= 2, "its query ran $ran times in 3.5 s");
};

subtest 'a parked pop of a new group on an old backlog rechecks with backoff' => sub {
	$q->push_n('backlog', 3);
	my $before = queries();
	my $lp = park('/api/v1/pop/queue/backlog', consumerGroup => 'fresh', timeout => 6500);
	is($lp->result(15)->{status}, 204, 'nothing new: 204 at the deadline');
	my $ran = queries() - $before;
	ok($ran <= 4, "its query ran $ran times in 6.5 s (1 s, then 2, then 4 between rechecks)");
};

subtest 'parked long-polls beyond QUEEN_MAX_LONGPOLLS get 429 with Retry-After' => sub {
	my @lps = map { park('/api/v1/pop/queue/capped') } 1 .. 3;
	until_parked(3);
	my ($s, $b, $h) = $q->get('/api/v1/pop/queue/capped', { wait => 'true', timeout => 5000 });
	is($s, 429, 'the fourth is refused with 429');
	like($h->{'retry-after'} // '', qr/^\d+$/, 'with Retry-After');
	like($b->{error} // '', qr/long-poll/, 'and an error saying why');
	($s) = $q->get('/api/v1/pop/queue/capped');
	is($s, 204, 'a pop that does not wait is still served');
	is(lp()->{refused}, 1, '/metrics counts the refusal');
	$q->push_items(map { { queue => 'capped', partition => "p$_" } } 1 .. 3);
	is($_->result(15)->{status}, 200, 'a parked one is woken by the push') for @lps;
	ok(wait_until(sub { parked() == 0 }, 5), 'their slots are free again');
	my $again = park('/api/v1/pop/queue/capped2', timeout => 1000);
	is($again->result(15)->{status}, 204, 'a new long-poll parks again (204 at its deadline)');
};

subtest 'a parked pop whose client went away is released within a second' => sub {
	my $before = lp()->{abandoned} // 0;
	my @socks;
	for my $i (1 .. 3) {
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->port,
			Proto => 'tcp') or die "connect: $!";
		syswrite($s, "GET /api/v1/pop/queue/gone?wait=true&timeout=60000 HTTP/1.1\r\n" .
			"Host: x\r\n\r\n");
		push @socks, $s;
	}
	until_parked(3);
	close $_ for @socks;
	my $t0 = time;
	ok(wait_until(sub { parked() == 0 }, 10, 0.02), 'all three released');
	my $took = time - $t0;
	ok($took < 1.0, sprintf('within %.0f ms of the clients leaving', $took * 1000));
	is(lp()->{abandoned} - $before, 3, '/metrics counts them as abandoned');
	my ($s) = $q->get('/health');
	is($s, 200, 'the broker is fine');
};

subtest 'a push to more than 64 queues wakes every parked pop it makes data ready for' => sub {
	my @lps = map { park("/api/v1/pop/queue/many-$_") } 68 .. 70;
	until_parked(3);
	my $t0 = time;
	my ($s) = $q->push_items(map { { queue => "many-$_", transactionId => "m$_" } } 1 .. 70);
	is($s, 201, 'one push to 70 queues');
	for my $lp (@lps) {
		my $r = $lp->result(15);
		is($r->{status}, 200, 'a pop parked on one of the last queues is woken');
		ok(($r->{at} // 1e9) - $t0 < 1.0, 'at once');
	}
};

subtest 'a pop parked on the namespace of an undotted queue name is woken by its push' => sub {
	my $lp = park('/api/v1/pop', namespace => 'plainname');
	until_parked(1);
	$q->push_items({ queue => 'plainname', transactionId => 'plain-1' });
	my $r = $lp->result(15);
	is($r->{status}, 200, 'woken: namespace = the whole name (SPEC 21)');
	is_deeply(txns($r->{body}), ['plain-1'], 'with the message');
};

done_testing();
