#!/usr/bin/perl
# 10,000 timers falling due in the same second are all delivered, each once, in bounded
# rounds (SPEC 14, DESIGN "Maintenance"). The target is within 2 s of their due time on an
# idle machine; the suite runs on loaded ones, so the time is reported and only a generous
# bound asserted.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use List::Util qw(max sum);
use Test::More;
use Time::HiRes qw(time);
use QueenTest;

start_pg();
my $q = start_queend();

my $n = 10_000;
my @queues = map { "burst-$_" } 0 .. 3;
my $due = time + 45;
my ($first, $latest) = (9e9, 0);
my $t0 = time;
for (my $i = 0; $i < $n; $i += 250) {
	my $delay = int(($due - time) * 1000);
	$delay = 0 if $delay < 0;
	my @ops = map { +{ op => 'schedule', queue => $queues[$_ % 4], partition => 'p' . ($_ % 8),
		timerKey => "t-$_", delayMs => $delay, payload => { i => $_ } } } $i .. $i + 249;
	my ($s, $b) = $q->post_json('/api/v1/timers', { operations => \@ops });
	die "scheduling failed: $s\n" . explain($b) unless $s == 200;
	for my $at (map { iso_epoch($_->{deliverAt}) } @{ $b->{results} }) {
		$first = $at if $at < $first;
		$latest = $at if $at > $latest;
	}
}
diag(sprintf('scheduled %d timers in %.1f s, due within %.3f s of each other', $n, time - $t0,
	$latest - $first));

sub detail {
	my $queue = shift;
	my ($s, $d) = $q->get("/api/v1/resources/queues/$queue");
	return $s == 200 ? $d : { totals => { messages => 0 }, partitions => [] };
}
sub delivered { sum(map { detail($_)->{totals}{messages} } @queues) }

ok(wait_until(sub { delivered() >= $n }, 120, 0.25), "all $n timers delivered")
	or diag('delivered ' . delivered());
is(delivered(), $n, 'each exactly once');
my $last = max(map { iso_epoch($_->{lastMessageAt}) // 0 } map { @{ detail($_)->{partitions} } }
	@queues);
my $took = $last - $latest;
diag(sprintf('the last one was delivered %.2f s after the due time', $took));
ok($took < 30, 'well within bounds (target: 2 s on an idle machine)');
my ($s, $l) = $q->get("/api/v1/timers/$queues[0]");
is_deeply($l->{timers}, [], 'nothing left pending');

done_testing();
