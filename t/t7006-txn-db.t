#!/usr/bin/perl
# Database trouble under a transaction (SPEC 8): a bundle whose statement fails on a live
# connection (here: it waits on a lock past QUEEN_STMT_TIMEOUT_MS) is still a 200, success
# false, reason db_error, and wrote nothing; with PostgreSQL unreachable the answer is 503
# (a bundle cannot be spooled: its acks need the database), and the route works again once
# the database is back.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use QueenTest;

my $pg = start_pg();
my $q = start_queend(QUEEN_STMT_TIMEOUT_MS => 2000);

$q->push_n('locked', 1);

subtest 'a statement that fails: 200, db_error, nothing written' => sub {
	# Another session holds the partition row lock for a while.
	my $holder = bg(sub {
		$pg->psql("BEGIN; SELECT 1 FROM queen_partitions FOR UPDATE; SELECT pg_sleep(12); COMMIT;");
		return 1;
	});
	ok(wait_until(sub {
		$pg->psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(12)%' " .
			"AND state = 'active' AND pid <> pg_backend_pid()") eq '1';
	}, 30, 0.2), 'a session holds the partition lock');

	my $t0 = time;
	my ($s, $b, undef, $raw) = $q->post_json('/api/v1/transaction', { operations => [
		{ type => 'push', queue => 'elsewhere', transactionId => 'e-1' },
		{ type => 'push', queue => 'locked', transactionId => 'l-1' } ] });
	is($s, 200, sprintf('answered 200 after %.1f s', time - $t0)) or diag($raw);
	is_false($b->{success}, 'success false');
	is($b->{reason}, 'db_error', 'reason db_error');
	like($b->{error} // '', qr/database error/, "error: $b->{error}");
	is_deeply($b->{results}, [], 'results empty');
	ok($holder->result(60), 'the other session let go');

	($s) = $q->get('/api/v1/resources/queues/elsewhere');
	is($s, 404, 'the push to the unlocked queue is undone too');
	(undef, $b) = $q->get('/api/v1/resources/queues/locked/depth');
	is($b->{totalMessages}, 1, 'nothing added to the locked queue');
	($s, $b) = $q->post_json('/api/v1/transaction', { operations => [
		{ type => 'push', queue => 'locked', transactionId => 'l-1' } ] });
	is_true($b->{success}, 'the same bundle commits once the lock is gone');
};

subtest 'maintenance mode: a bundle with pushes is refused, one without is applied' => sub {
	my ($s) = $q->post_json('/api/v1/system/maintenance', { enabled => jtrue });
	is($s, 200, 'maintenance mode on');
	my ($st, $b) = $q->post_json('/api/v1/transaction', { operations => [
		{ type => 'push', queue => 'locked', transactionId => 'maint-1' } ] });
	is($st, 503, 'pushes cannot be spooled inside a bundle: 503');
	like($b->{error} // '', qr/spool/, "error: $b->{error}");
	($st, $b) = $q->post_json('/api/v1/transaction',
		{ kv => [ { op => 'put', ns => 'm', key => 'k', value => 1, forever => jtrue } ] });
	is($st, 200, 'a bundle without pushes: 200');
	is_true($b->{success}, 'applied');
	($s) = $q->post_json('/api/v1/system/maintenance', { enabled => jfalse });
	is($s, 200, 'maintenance mode off');
	($st, $b) = $q->post_json('/api/v1/transaction', { operations => [
		{ type => 'push', queue => 'locked', transactionId => 'maint-1' } ] });
	is_true($b->{success}, 'the bundle commits once it is off');
};

subtest 'PostgreSQL unreachable: 503' => sub {
	ok($pg->stop('immediate'), 'PostgreSQL stopped');
	my $t0 = time;
	my ($s, $b) = $q->post_json('/api/v1/transaction', { operations => [
		{ type => 'push', queue => 'locked', transactionId => 'down-1' } ] });
	is($s, 503, sprintf('503 in %.1f s', time - $t0));
	ok(time - $t0 < 20, 'without hanging');
	like($b->{error} // '', qr/database/, "error: $b->{error}");

	ok($pg->start, 'PostgreSQL started again');
	my $r;
	wait_until(sub {
		(undef, $r) = $q->post_json('/api/v1/transaction', { operations => [
			{ type => 'push', queue => 'locked', transactionId => 'up-1' } ] });
		return ref $r eq 'HASH' && $r->{success};
	}, 60, 0.5);
	is_true($r->{success}, 'transactions commit again');
	my (undef, $d) = $q->get('/api/v1/resources/queues/locked/depth');
	is($d->{totalMessages}, 4, 'the bundle refused during the outage was not stored');
};

done_testing;
