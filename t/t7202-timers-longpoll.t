#!/usr/bin/perl
# A fired timer wakes parked consumers at once (SPEC 14): a long-poll parked on the timer's
# queue -- or on a namespace the queue belongs to, before the queue even exists -- answers
# with the timer's message well before its own timeout.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

sub parked {
	my (undef, $m) = $q->get('/metrics');
	return ($m // {})->{longPoll}{parked} // 0;
}

# Parks a pop on $path in a child (timeout 20 s) and waits until the broker counts it parked.
sub park {
	my ($path, %query) = @_;
	my $before = parked();
	my $lp = bg(sub {
		my ($s, $j) = $q->get($path, { wait => 'true', timeout => 20000, %query });
		return { status => $s, body => $j, at => time };
	});
	ok(wait_until(sub { parked() > $before }, 20), 'the pop is parked');
	return $lp;
}

sub schedule {
	my (%o) = @_;
	my ($s, $b) = $q->post_json('/api/v1/timers', { operations => [{ op => 'schedule', %o }] });
	is($s, 200, "scheduled $o{timerKey}");
	return ($b->{results} // [])->[0] // {};
}

subtest 'a pop parked on the queue is woken by the timer firing' => sub {
	$q->push_n('lpq', 1);
	my ($s, $b) = $q->pop('lpq');
	$q->ack_all($b);
	my $lp = park('/api/v1/pop/queue/lpq');
	my $t0 = time;
	my $r = schedule(queue => 'lpq', timerKey => 'wake', delayMs => 500, payload => { w => 1 });
	my $res = $lp->result(30);
	is($res->{status}, 200, 'the parked pop answers 200') or diag(explain $res);
	is_deeply(txns($res->{body}), [$r->{txn}], 'with the timer\'s message');
	is($res->{body}{messages}[0]{id}, $r->{messageId}, 'carrying the promised id');
	my $lat = ($res->{at} // 1e9) - $t0;
	ok($lat < 10, sprintf('answered %.0f ms after scheduling a 500 ms timer (timeout 20 s)',
		$lat * 1000));
};

subtest 'a pop parked on a queue that does not exist yet is woken by the timer creating it' => sub {
	my $lp = park('/api/v1/pop/queue/timer-made');
	my $r = schedule(queue => 'timer-made', timerKey => 'first', delayMs => 200,
		payload => 'hi');
	my $res = $lp->result(30);
	is($res->{status}, 200, 'the parked pop answers 200') or diag(explain $res);
	is($res->{body}{messages}[0]{id}, $r->{messageId}, 'with the timer\'s message');
};

subtest 'a pop parked on a namespace is woken by a timer to a queue of it' => sub {
	my $lp = park('/api/v1/pop', namespace => 'billing');
	my $r = schedule(queue => 'billing.invoice.v2', timerKey => 'inv', delayMs => 200,
		payload => { n => 1 });
	my $res = $lp->result(30);
	is($res->{status}, 200, 'the parked discovery pop answers 200') or diag(explain $res);
	is($res->{body}{messages}[0]{id}, $r->{messageId}, 'with the timer\'s message');
	is($res->{body}{messages}[0]{queue}, 'billing.invoice.v2', 'naming its queue');
};

done_testing();
