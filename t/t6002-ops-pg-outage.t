#!/usr/bin/perl
# PostgreSQL goes away and comes back (SPEC 4, 15, 16): /health says 503, a push is still
# answered (buffered) and never hangs, and the broker reconnects by itself and drains.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

$q->push_n('out', 1, prefix => 'before');

ok($pg->stop('immediate'), 'PostgreSQL stopped (immediate)');

subtest '/health says 503 while the database is gone' => sub {
	my ($s, $b);
	my $t0 = time;
	wait_until(sub { ($s, $b) = $q->get('/health'); $s == 503 }, 20, 0.2);
	is($s, 503, sprintf('503 (after %.1f s)', time - $t0));
	is($b->{status}, 'unhealthy', 'status unhealthy');
	is($b->{database}, 'disconnected', 'database disconnected');
};

subtest 'a push during the outage is answered, buffered' => sub {
	my $t0 = time;
	my ($s, $b) = $q->push_items({ queue => 'out', transactionId => 'during-0', payload => 'spooled' });
	my $took = time - $t0;
	is($s, 201, sprintf('answered 201 in %.2f s', $took)) or diag(explain $b);
	ok($took < 15, 'without hanging');
	my $e = ref $b eq 'ARRAY' ? $b->[0] : {};
	is($e->{status}, 'buffered', 'status buffered');
	is($e->{transaction_id}, 'during-0', 'transaction_id');
	($s, $b) = $q->get('/api/v1/status/buffers');
	is($s, 200, '/api/v1/status/buffers');
	ok(($b->{pendingCount} // 0) >= 1, 'pendingCount >= 1');
	is_false($b->{dbHealthy}, 'dbHealthy false');
};

subtest 'a pop during the outage is answered too' => sub {
	my $t0 = time;
	my ($s) = $q->pop('out');
	ok($s != 599, "answered ($s) in " . sprintf('%.2f s', time - $t0));
	ok(time - $t0 < 15, 'without hanging');
	isnt($s, 200, 'with no messages');
};

ok($pg->start, 'PostgreSQL started again');

subtest 'the broker reconnects by itself and drains the spool' => sub {
	my ($s, $b);
	my $t0 = time;
	wait_until(sub { ($s, $b) = $q->get('/health'); $s == 200 }, 30, 0.2);
	is($s, 200, sprintf('/health 200 again (after %.1f s)', time - $t0));
	is($b->{database}, 'connected', 'database connected');
	my %seen;
	wait_until(sub {
		my ($ps, $pb) = $q->pop('out', batch => 10);
		if ($ps == 200) {
			$seen{$_}++ for @{ txns($pb) };
			$q->ack_all($pb);
		}
		$seen{'during-0'};
	}, 20, 0.2);
	is_deeply(\%seen, { 'before-0' => 1, 'during-0' => 1 }, 'both messages, each once');
	my ($ps) = $q->pop('out');
	is($ps, 204, 'nothing more');
	($s, $b) = $q->get('/api/v1/status/buffers');
	is($b->{pendingCount}, 0, 'the spool is empty');
	($s, $b) = $q->push_items({ queue => 'out', transactionId => 'after-0' });
	is(ref $b eq 'ARRAY' ? $b->[0]{status} : $s, 'queued', 'pushes are queued again');
};

done_testing;
