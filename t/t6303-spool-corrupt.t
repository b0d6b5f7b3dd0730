#!/usr/bin/perl
# A damaged spool (SPEC 15): a record cut short at the tail (the crash came mid-write) or
# whose checksum fails is dropped with a warning, never half-replayed, and every other record
# is drained in order; a damaged record in the middle is skipped and the ones after it kept,
# also when its marker or its length is what the damage hit (reading resumes at the next
# valid record: before, recovery dropped everything after a damaged header).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();

sub slurp { open my $fh, '<', $_[0] or return ''; local $/; <$fh> }

# Offsets and lengths of the records of a spool file: [offset, total length] each.
sub records {
	my $bytes = slurp(shift);
	my ($pos, @r) = (0);
	while ($pos + 12 <= length $bytes) {
		my ($magic, $len) = unpack('a4 V', substr($bytes, $pos, 8));
		last unless $magic eq 'QSP1';
		push @r, [ $pos, 12 + $len ];
		$pos += 12 + $len;
	}
	return @r;
}

# Buffers five one-item pushes "$prefix-0".."$prefix-4" into a fresh spool dir, kills the
# broker, lets $damage change the segment file, starts a broker on the dir and returns it.
sub spool_and_damage {
	my ($prefix, $damage) = @_;
	my $dir = QueenTest::tmpdir() . "/spool-$prefix";
	my $b = start_queend(FILE_BUFFER_DIR => $dir);
	$b->post_json('/api/v1/system/maintenance', { enabled => jtrue });
	for my $i (0 .. 4) {
		my (undef, $r) = $b->push_items({ queue => $prefix, transactionId => "$prefix-$i",
			payload => { i => $i } });
		die "not buffered\n" unless ($r->[0]{status} // '') eq 'buffered';
	}
	$b->kill_hard;
	my @seg = glob("$dir/seg-*.spool");
	die "expected one segment, found @seg\n" unless @seg == 1;
	my @rec = records($seg[0]);
	die "expected 5 records\n" unless @rec == 5;
	$damage->($seg[0], @rec);
	return start_queend(FILE_BUFFER_DIR => $dir);
}

sub drained {
	my ($b, $queue, $want, $log_re, $name) = @_;
	subtest $name => sub {
		wait_until(sub { (($b->get('/api/v1/status/buffers'))[1] // {})->{pendingCount} == 0 },
			30, 0.1);
		is((($b->get('/api/v1/status/buffers'))[1] // {})->{pendingCount}, 0, 'spool drained');
		like(slurp($b->{log}), $log_re, 'the damage is reported in the log');
		my ($s, $p) = $b->pop($queue, batch => 100);
		is_deeply(txns($p), $want, 'the intact records, in order, once');
		is_deeply([ map { $_->{data} } @{ $p->{messages} // [] } ],
			[ map { { i => (split /-/)[1] } } @$want ], 'with their payloads');
		$b->ack_all($p) if $s == 200;
		($s) = $b->pop($queue);
		is($s, 204, 'nothing else');
	};
}

my $b1 = spool_and_damage('torn', sub {
	my ($file, @rec) = @_;
	truncate($file, $rec[-1][0] + $rec[-1][1] - 3) or die "truncate: $!";
});
drained($b1, 'torn', [ map { "torn-$_" } 0 .. 3 ], qr/dropped a torn record at the tail/,
	'a record cut short at the tail is dropped');

my $b2 = spool_and_damage('crc', sub {
	my ($file, @rec) = @_;
	open my $fh, '+<', $file or die "$file: $!";
	binmode $fh;
	my $at = $rec[-1][0] + $rec[-1][1] - 2;	# inside the last payload
	seek($fh, $at, 0);
	read($fh, my $c, 1);
	seek($fh, $at, 0);
	print {$fh} chr(ord($c) ^ 0x01);
	close $fh;
});
drained($b2, 'crc', [ map { "crc-$_" } 0 .. 3 ], qr/dropped a corrupt record at the tail/,
	'a last record whose checksum fails is dropped');

my $b3 = spool_and_damage('mid', sub {
	my ($file, @rec) = @_;
	open my $fh, '+<', $file or die "$file: $!";
	binmode $fh;
	my $at = $rec[2][0] + $rec[2][1] - 2;
	seek($fh, $at, 0);
	read($fh, my $c, 1);
	seek($fh, $at, 0);
	print {$fh} chr(ord($c) ^ 0x01);
	close $fh;
});
drained($b3, 'mid', [ 'mid-0', 'mid-1', 'mid-3', 'mid-4' ], qr/fails its checksum: skipped/,
	'a damaged record in the middle is skipped, the rest kept');

# A sub that overwrites $len bytes at $at of the spool file with $bytes.
sub overwrite {
	my ($at_of, $bytes) = @_;
	return sub {
		my ($file, @rec) = @_;
		open my $fh, '+<', $file or die "$file: $!";
		binmode $fh;
		seek($fh, $at_of->(@rec), 0);
		print {$fh} $bytes;
		close $fh;
	};
}

my $b4 = spool_and_damage('mark', overwrite(sub { $_[1][0] }, 'XXXX'));
drained($b4, 'mark', [ 'mark-0', 'mark-2', 'mark-3', 'mark-4' ], qr/hold no valid record: skipped/,
	'spool_recovery_past_damaged_marker: a record whose marker is damaged is lost alone');

# Its length now says the record runs past the end of the file: it looks torn, yet valid
# records follow it.
my $b5 = spool_and_damage('len', overwrite(sub { $_[2][0] + 4 }, pack('V', 1 << 20)));
drained($b5, 'len', [ 'len-0', 'len-1', 'len-3', 'len-4' ], qr/hold no valid record: skipped/,
	'spool_recovery_past_torn_middle: a record cut short in the middle is lost alone');

done_testing;
