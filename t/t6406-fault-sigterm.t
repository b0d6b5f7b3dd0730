#!/usr/bin/perl
# A graceful stop under load (SPEC 15, 19; queend(8) SIGNALS): SIGTERM while producers push
# and consumers pop: every request is answered or refused, none answered and then lost (what
# was buffered waits in the spool for the next start), parked long-polls get 204, and the
# broker exits 0 within the TimeoutStopSec of contrib/queend.service.in.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;
use QueenLoad;

my $limit = 90;
if (open my $fh, '<', "$FindBin::Bin/../contrib/queend.service.in") {
	($limit) = map { /^TimeoutStopSec=(\d+)/ ? $1 : () } <$fh>;
	close $fh;
}
ok($limit, "TimeoutStopSec of the unit: $limit s");

my $pg = start_pg();
my $dir = QueenTest::tmpdir() . '/spool-term';
my $port = QueenTest::free_port();
my $q = start_queend(FILE_BUFFER_DIR => $dir, PORT => $port);
$q->configure('fq', leaseTime => 2);
my $producers = 3;
my $load = QueenLoad->start($q, producers => $producers, consumers => 2, batch => 5);
my @parked = map {
	my $i = $_;
	QueenTest::bg(sub {
		my ($s) = $q->pop("idle-$i", wait => 'true', timeout => 30000);
		return $s;
	});
} 1 .. 3;
sleep 2;
# Some of the load waits in the spool when the stop comes.
$q->post_json('/api/v1/system/maintenance', { enabled => jtrue });
sleep 0.5;
my $spooled = (($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} // 0;
my $t0 = time;
my $st = $q->stop($limit);
my $took = time - $t0;
is($st, 0, sprintf('exit status 0 after SIGTERM, in %.2f s', $took));
ok($took < $limit, "within TimeoutStopSec ($limit s)");
is_deeply([ map { $_->result(10) } @parked ], [ 204, 204, 204 ], 'the parked long-polls got 204');

# The next broker on the same spool stores what was buffered; the producers went on retrying.
$q = start_queend(FILE_BUFFER_DIR => $dir, PORT => $port);
sleep 1;
my $r = $load->finish($pg, 30);
$load->figures('SIGTERM', $r, stop_s => sprintf('%.2f', $took), spooled_at_stop => $spooled);
ok($r->{acked} > 0 && $spooled > 0, "items acknowledged: $r->{acked}, $spooled in the spool at the stop");
is($r->{lost}, 0, 'no item answered queued or buffered is lost') or diag("lost: @{ $r->{lost_keys} }");
is($r->{dup_txn} + $r->{dup_plain}, 0, 'nothing is stored twice');
is((($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount}, 0, 'the spool is drained');

done_testing;
