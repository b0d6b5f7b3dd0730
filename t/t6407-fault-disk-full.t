#!/usr/bin/perl
# A full disk under the spool (SPEC 4, 15): a push that can be neither stored nor spooled is
# refused with 503, never answered "buffered"; what was buffered before the disk filled is
# stored once the spool drains, and pushes are stored again. FILE_BUFFER_DIR is a small
# tmpfs (needs root to mount it; skipped otherwise).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $dir = QueenTest::tmpdir() . '/spool-full';
mkdir $dir or die "mkdir $dir: $!";
plan(skip_all => 'mounting a small tmpfs needs root') if $> != 0;
plan(skip_all => 'cannot mount a tmpfs here')
	if system('mount', '-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', $dir) != 0;
my $q;
END { $q->stop if $q; system('umount', '-l', $dir) if $dir && $> == 0 }

$q = start_queend(FILE_BUFFER_DIR => $dir);
$q->post_json('/api/v1/system/maintenance', { enabled => jtrue });
my $pad = 'x' x 4000;
my (%buffered, $refused, $other, $after_full);
for my $i (0 .. 199) {
	my ($s, $b) = $q->push_items({ queue => 'full', transactionId => "f-$i",
		payload => { i => $i, pad => $pad } });
	if ($s == 503) {
		$refused++;
		like($b->{error} // '', qr/spool cannot write/, 'the 503 says the spool cannot write')
			if $refused == 1;
		last if $refused >= 3;
		next;
	}
	my $st = ref $b eq 'ARRAY' ? $b->[0]{status} : "status $s";
	if ($st eq 'buffered') {
		$buffered{"f-$i"} = 1;
		$after_full++ if $refused;
	} else {
		$other++;
	}
}
ok($refused, 'the disk filled up: pushes refused with 503');
ok(keys %buffered > 10, scalar(keys %buffered) . ' pushes buffered before');
ok(!$other, 'no push answered anything but buffered or 503');
ok(!$after_full, 'none buffered once the disk was full');

$q->post_json('/api/v1/system/maintenance', { enabled => jfalse });
wait_until(sub { (($q->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} == 0 }, 30, 0.1);
my %got;
while (1) {
	my ($s, $p) = $q->pop('full', batch => 100);
	last unless $s == 200;
	$got{ $_->{transactionId} }++ for @{ $p->{messages} };
	$q->ack_all($p);
}
is_deeply(\%got, { map { $_ => 1 } keys %buffered }, 'every buffered push is stored, once');
my ($s, $b) = $q->push_items({ queue => 'full', transactionId => 'after' });
is($b->[0]{status}, 'queued', 'pushes are stored again');

done_testing;
