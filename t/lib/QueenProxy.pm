package QueenProxy;
# A TCP proxy between the broker and PostgreSQL, in a forked process, that can lose answers:
# in mode "swallow:NAME" it forwards everything, but once a connection runs the prepared
# statement NAME (a Bind message naming it) it drops what the server answers and closes that
# connection, as a network failing between a commit and its answer would. Other connections
# are left alone. Core Perl modules only.
#
#   my $px = QueenProxy->start($pg->port);     # listens on 127.0.0.1:$px->port
#   $px->mode('swallow:push'); ... $px->mode('pass');
use strict;
use warnings;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time);

sub start {
	my ($class, $target) = @_;
	my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
		Listen => 64, ReuseAddr => 1) or die "proxy: cannot listen: $!\n";
	my $self = bless { port => $l->sockport, file => QueenTest::tmpdir() . '/proxy-mode-' .
		$l->sockport }, $class;
	$self->mode('pass');
	my $pid = fork // die "fork: $!";
	if (!$pid) {
		$SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
		eval { _run($l, $target, $self->{file}) };
		POSIX::_exit(0);
	}
	close $l;
	$self->{pid} = $pid;
	return $self;
}

sub port { $_[0]{port} }

sub mode {
	my ($self, $mode) = @_;
	open my $fh, '>', "$self->{file}.tmp" or die "proxy mode: $!";
	print {$fh} $mode;
	close $fh;
	rename "$self->{file}.tmp", $self->{file} or die "proxy mode: $!";
	# The proxy re-reads the file at most every 20 ms: wait that out, so that the next
	# request is already under the new mode (a push sent at once could still pass).
	Time::HiRes::sleep(0.05);
}

sub stop {
	my $self = shift;
	return unless $self->{pid};
	kill 'KILL', $self->{pid};
	waitpid($self->{pid}, 0);
	delete $self->{pid};
}

sub DESTROY { $_[0]->stop }

sub _run {
	my ($l, $target, $file) = @_;
	my $sel = IO::Select->new($l);
	my (%peer, %close_at, %from_server, %marked);
	my ($mode, $checked) = ('pass', 0);
	my $drop = sub {
		my $s = shift;
		my $p = delete $peer{$s};
		for my $x (grep { defined } $s, $p) {
			$sel->remove($x);
			delete $close_at{$x};
			delete $from_server{$x};
			delete $marked{$x};
			delete $peer{$x};
			close $x;
		}
	};
	while (1) {
		if (time - $checked > 0.02) {
			if (open my $fh, '<', $file) { $mode = <$fh> // 'pass'; close $fh }
			$checked = time;
		}
		for my $s (grep { $close_at{$_} <= time } keys %close_at) {
			my ($sock) = grep { "$_" eq $s } $sel->handles;
			$drop->($sock) if $sock;
			delete $close_at{$s};
		}
		for my $s ($sel->can_read(0.02)) {
			if ($s == $l) {
				my $c = $l->accept or next;
				my $u = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $target,
					Proto => 'tcp');
				if (!$u) { close $c; next }
				$peer{$c} = $u;
				$peer{$u} = $c;
				$from_server{$u} = 1;
				$sel->add($c, $u);
				next;
			}
			my $n = sysread($s, my $buf, 65536);
			if (!$n) {
				$drop->($s);
				next;
			}
			my $p = $peer{$s} or next;
			# A Bind names its statement after the (unnamed) portal's NUL; a Parse has
			# its query text after the name.
			if (!$from_server{$s} && $mode =~ /^swallow:(\w+)$/ && $buf =~ /\0\Q$1\E\0(?!SELECT)/) {
				$marked{$p} = 1;
			}
			if ($from_server{$s} && $marked{$s}) {
				# The answer is lost; the connection dies a moment later.
				$close_at{$s} //= time + 0.1;
				next;
			}
			syswrite($p, $buf);
		}
	}
}

1;
