#!/usr/bin/perl
# The spool survives the broker (SPEC 15, 19): items buffered by a broker killed with SIGKILL
# are stored by the next broker on the same FILE_BUFFER_DIR, each exactly once, in order, with
# the ids they were answered; and a replay repeated after a crash between commit and the
# removal of the spool file (simulated by putting the file back) stores nothing twice, also
# for items pushed without a transactionId.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Copy qw(copy);
use QueenTest;

start_pg();
my $dir = QueenTest::tmpdir() . '/spool-shared';
my $q = start_queend(FILE_BUFFER_DIR => $dir);

sub segments { my @f = sort glob("$dir/seg-*.spool"); return @f }
sub slurp { open my $fh, '<', $_[0] or return ''; local $/; <$fh> }

# Pops everything of a partition for a fresh group reading from the start; returns messages.
sub read_all {
	my ($b, $part, $group) = @_;
	my @got;
	while (1) {
		my ($s, $p) = $b->pop('rq', partition => $part, batch => 50, consumerGroup => $group,
			subscriptionMode => 'all');
		last unless $s == 200;
		push @got, @{ $p->{messages} };
		$b->ack_all($p);
	}
	return \@got;
}

my (@sent, %answer);
is(($q->post_json('/api/v1/system/maintenance', { enabled => jtrue }))[0], 200,
	'maintenance on: pushes go to the spool');
for my $r (0 .. 5) {
	my @items = map { my $n = $r * 5 + $_;
		{ queue => 'rq', partition => "p" . ($n % 2), payload => { n => $n },
		  ($n % 3 ? (transactionId => "t-$n") : ()) } } 0 .. 4;
	my ($s, $b) = $q->push_items(@items);
	die "push: $s\n" unless $s == 201 && ref $b eq 'ARRAY';
	for my $i (0 .. $#items) {
		push @sent, $items[$i];
		$answer{ $items[$i]{payload}{n} } = $b->[$i];
	}
}
is(scalar(grep { $_->{status} eq 'buffered' } values %answer), 30, '30 items buffered');
ok(scalar(my @f = segments()) >= 1, 'in spool segment files');

$q->kill_hard;
pass('broker killed with SIGKILL');
my @saved;
for my $f (segments()) {
	copy($f, "$f.saved") or die "copy $f: $!";
	push @saved, $f;
}

my $q2 = start_queend(FILE_BUFFER_DIR => $dir);
subtest 'the next broker drains what it finds' => sub {
	wait_until(sub { (($q2->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} == 0 }, 30, 0.1);
	my (undef, $b) = $q2->get('/api/v1/status/buffers');
	is($b->{pendingCount}, 0, 'pendingCount 0');
	is_true($b->{dbHealthy}, 'dbHealthy');
	is_deeply([ segments() ], [], 'the drained segment files are removed');
	like(slurp($q2->{log}), qr/30 buffered pushes found/,
		'the start-up log says what it found');
	for my $part ('p0', 'p1') {
		my @want = grep { $_->{partition} eq $part } @sent;
		my $got = read_all($q2, $part, 'g1');
		is_deeply([ map { $_->{data}{n} } @$got ], [ map { $_->{payload}{n} } @want ],
			"$part: each item exactly once, in push order");
		is_deeply([ map { $_->{id} } @$got ],
			[ map { $answer{ $_->{payload}{n} }{message_id} } @want ],
			"$part: with the message ids answered before the crash");
	}
};

subtest 'a repeated replay stores nothing twice' => sub {
	is($q2->stop, 0, 'broker stopped');
	for my $f (@saved) {
		rename("$f.saved", $f) or die "rename: $!";
	}
	my $q3 = start_queend(FILE_BUFFER_DIR => $dir);
	wait_until(sub { (($q3->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} == 0 }, 30, 0.1);
	is((($q3->get('/api/v1/status/buffers'))[1] // {})->{pendingCount}, 0, 'replayed again');
	is_deeply([ segments() ], [], 'and removed');
	for my $part ('p0', 'p1') {
		my @want = grep { $_->{partition} eq $part } @sent;
		my $got = read_all($q3, $part, 'g2');
		is(scalar @$got, scalar @want, "$part: still " . scalar(@want) . ' messages');
		is_deeply([ map { $_->{id} } @$got ],
			[ map { $answer{ $_->{payload}{n} }{message_id} } @want ],
			"$part: the same ones (items without a transactionId included)");
	}
	my ($s) = $q3->pop('rq', partition => 'p0', consumerGroup => 'g1');
	is($s, 204, 'the group that read everything gets nothing new');
};

done_testing;
