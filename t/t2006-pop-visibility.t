#!/usr/bin/perl
# Visibility (SPEC 5, 9): delayedProcessing keeps a message invisible until it is that old;
# windowBuffer delivers nothing from a partition whose newest message is younger than that.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

# Pops until a message is delivered; returns (body, seconds since $since).
sub first_delivery {
	my ($queue, $since) = @_;
	my $b;
	wait_until(sub { my $s; ($s, $b) = $q->pop($queue, batch => 10); $s == 200 }, 8, 0.05);
	return ($b, time - $since);
}

subtest 'delayedProcessing 2: invisible for two seconds, then delivered' => sub {
	my ($s) = $q->configure('delayed', delayedProcessing => 2);
	is($s, 200, 'configured');
	my $t0 = time;
	$q->push_n('delayed', 2);
	($s) = $q->pop('delayed');
	is($s, 204, 'right after the push: 204');
	my ($b, $secs) = first_delivery('delayed', $t0);
	is_deeply(txns($b), [qw(delayed-m-0 delayed-m-1)], 'then delivered');
	ok($secs >= 1.9, sprintf('not before two seconds had passed (%.2f s)', $secs));
	ok($secs < 5, 'and not much later');
};

subtest 'windowBuffer 2: a partition delivers after two seconds of quiet' => sub {
	my ($s) = $q->configure('windowed', windowBuffer => 2);
	is($s, 200, 'configured');
	$q->push_n('windowed', 1, prefix => 'w1');
	($s) = $q->pop('windowed');
	is($s, 204, 'right after the push: 204');
	sleep 1.2;
	my $t_last = time;
	$q->push_n('windowed', 1, prefix => 'w2');
	sleep 1;
	($s) = $q->pop('windowed');
	is($s, 204, 'the first message is old enough but the partition is not quiet: 204');
	my ($b, $secs) = first_delivery('windowed', $t_last);
	is_deeply(txns($b), [qw(w1-0 w2-0)], 'then both together');
	ok($secs >= 1.9, sprintf('two seconds after the last push (%.2f s)', $secs));
};

subtest 'other queues are not affected' => sub {
	$q->push_n('plain', 1);
	my ($s) = $q->pop('plain');
	is($s, 200, 'a queue without either option delivers at once');
};

done_testing;
