#!/usr/bin/perl
# The spool's status and switches (SPEC 15, 21): /api/v1/status/buffers has its three fields;
# maintenance/pop makes pops answer 204 (a long-poll waits its timeout, and delivers once the
# switch is off) while pushes are still stored; an item that can be neither stored nor
# spooled answers "failed" with an error; FILE_BUFFER_DIR is checked at start-up.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Path qw(rmtree);
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

subtest 'GET /api/v1/status/buffers' => sub {
	my ($s, $b) = $q->get('/api/v1/status/buffers');
	is($s, 200, 'answers 200');
	is_deeply([ sort keys %{ $b // {} } ], [ 'dbHealthy', 'failedCount', 'pendingCount' ],
		'exactly pendingCount, failedCount, dbHealthy');
	is($b->{pendingCount}, 0, 'pendingCount 0');
	is($b->{failedCount}, 0, 'failedCount 0');
	is_true($b->{dbHealthy}, 'dbHealthy is a JSON true');
	my ($ps, $pb) = $q->post_json('/api/v1/status/buffers', {});
	is($ps, 405, 'POST -> 405');
};

subtest 'maintenance/pop: pops answer 204, pushes are still stored' => sub {
	my ($s, $b) = $q->get('/api/v1/system/maintenance/pop');
	is($s, 200, 'GET /api/v1/system/maintenance/pop');
	is_deeply($b, { enabled => jfalse }, 'off at start');
	($s, $b) = $q->post_json('/api/v1/system/maintenance/pop', { enabled => 1 });
	is($s, 400, 'enabled must be a boolean');
	$q->push_n('pp', 3);
	$q->push_n('ns1.t1', 1);
	($s, $b) = $q->post_json('/api/v1/system/maintenance/pop', { enabled => jtrue });
	is($s, 200, 'POST on');
	is_deeply($b, { enabled => jtrue }, 'answers the new state');
	is_true(($q->get('/api/v1/system/maintenance/pop'))[1]{enabled}, 'GET says on');
	is(($q->pop('pp'))[0], 204, 'pop on the queue: 204');
	is(($q->pop('pp', partition => 'Default'))[0], 204, 'pop on the partition: 204');
	is(($q->get('/api/v1/pop', { namespace => 'ns1' }))[0], 204, 'discovery pop: 204');
	my (undef, $pushed) = $q->push_items({ queue => 'pp', transactionId => 'pp-m-3' });
	is($pushed->[0]{status}, 'queued', 'a push is stored as usual');
	is_false(($q->get('/api/v1/system/maintenance'))[1]{enabled},
		'push maintenance is a separate switch');

	my $t0 = time;
	my ($ws) = $q->pop('pp', wait => 'true', timeout => 1500);
	my $took = time - $t0;
	is($ws, 204, 'a long-poll answers 204');
	ok($took >= 1.2, sprintf('after waiting its timeout (%.1f s)', $took));

	my $parked = bg(sub {
		my $t = time;
		my ($ps, $pb) = $q->pop('pp', wait => 'true', timeout => 30000, batch => 10);
		return { status => $ps, took => time - $t, txns => txns($pb) };
	});
	sleep 1;
	($s, $b) = $q->post_json('/api/v1/system/maintenance/pop', { enabled => jfalse });
	is_deeply($b, { enabled => jfalse }, 'POST off');
	my $r = $parked->result(40);
	is($r->{status}, 200, 'the parked pop delivers once the switch is off');
	ok(($r->{took} // 99) < 20, sprintf('soon after (%.1f s), not at its timeout', $r->{took} // -1));
	is_deeply($r->{txns}, [ map { "pp-m-$_" } 0 .. 3 ], 'everything, in order');
};

subtest 'a push that can be neither stored nor spooled answers 503, never buffered' => sub {
	my $dir = QueenTest::tmpdir() . '/spool-gone';
	my $b = start_queend(FILE_BUFFER_DIR => $dir);
	rmtree($dir);
	$b->post_json('/api/v1/system/maintenance', { enabled => jtrue });
	my ($s, $r) = $b->push_items({ queue => 'gone', transactionId => 'g-0' }, { queue => 'gone' });
	is($s, 503, 'the push is refused with 503');
	like($r->{error} // '', qr/spool cannot write/, 'saying why: ' . ($r->{error} // 'none'));
	is((($b->get('/api/v1/status/buffers'))[1] // {})->{pendingCount}, 0, 'nothing pending');
	$b->post_json('/api/v1/system/maintenance', { enabled => jfalse });
	(undef, $r) = $b->push_items({ queue => 'gone', transactionId => 'g-0' });
	is($r->[0]{status}, 'queued', 'stored once maintenance is off: the refused one was not kept');
};

subtest 'FILE_BUFFER_DIR is checked at start-up' => sub {
	my $file = QueenTest::tmpdir() . '/not-a-dir';
	open my $fh, '>', $file or die "$file: $!";
	close $fh;
	my ($st, $out) = run_queend([], FILE_BUFFER_DIR => "$file/spool");
	isnt($st, 0, "a directory that cannot be created stops the broker (exit $st)");
	like($out, qr/FILE_BUFFER_DIR \Q$file\E\/spool: cannot create/, 'naming FILE_BUFFER_DIR');
	my $busy = QueenTest::tmpdir() . '/spool-1';
	($st, $out) = run_queend([], FILE_BUFFER_DIR => $busy);
	isnt($st, 0, "a directory another broker uses stops the broker (exit $st)");
	like($out, qr/FILE_BUFFER_DIR \Q$busy\E is in use by another queend/, 'saying so');
	# Its workers were connecting when it gave up: leaving with them running aborted in a
	# library's exit handler (status 134) about one start in seven.
	my @st = map { (run_queend([], FILE_BUFFER_DIR => $busy))[0] } 1 .. 20;
	is_deeply(\@st, [ (1) x 20 ], 'twenty such starts each exit 1, never by a signal');
};

done_testing;
