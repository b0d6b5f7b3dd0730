#!/usr/bin/perl
# A burst of requests that all arrive while an HTTP thread is busy is answered at once, even
# when it fills exactly one read of that thread's event queue (128 events). libmicrohttpd
# 0.9.75 then waited for the next event with its full idle timeout (600 s) and left the
# burst unread until some other connection woke the thread (src/epollfix.c).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
# One HTTP thread, so that every connection shares one event queue.
my $q = start_queend(NUM_WORKERS => 1);

my $REQ = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

# Reads whole answers off a keep-alive connection until $want of them have come or the
# deadline passes; returns how many came.
sub answers {
	my ($s, $want, $deadline) = @_;
	my ($buf, $got) = ('', 0);
	while ($got < $want && time < $deadline) {
		my $rin = '';
		vec($rin, fileno($s), 1) = 1;
		next unless select(my $rout = $rin, undef, undef, 0.05) > 0;
		my $n = sysread($s, $buf, 65536, length $buf);
		last unless $n;
		while ($buf =~ /\r\n\r\n/) {
			my $h = index($buf, "\r\n\r\n");
			my ($len) = substr($buf, 0, $h) =~ /^content-length:\s*(\d+)/mi;
			last if length($buf) < $h + 4 + ($len // 0);
			substr($buf, 0, $h + 4 + ($len // 0), '');
			$got++;
		}
	}
	return $got;
}

for my $n (128, 256) {
	subtest "$n requests arriving at once on $n kept-alive connections" => sub {
		my @socks = map {
			IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->port,
				Proto => 'tcp') or die "connect: $!";
		} 1 .. $n;
		# Each connection serves one request first: all are accepted and idle.
		syswrite($_, $REQ) for @socks;
		is(scalar(grep { answers($_, 1, time + 10) == 1 } @socks), $n,
			"$n first requests answered");

		# The broker sleeps while every next request arrives: its thread then finds all
		# of them ready in one go.
		kill 'STOP', $q->pid;
		syswrite($_, $REQ) for @socks;
		sleep 0.2;
		kill 'CONT', $q->pid;
		my $t0 = time;
		my $answered = grep { answers($_, 1, $t0 + 5) == 1 } @socks;
		is($answered, $n, "all $n answered within 5 s");
		cmp_ok(time - $t0, '<', 5, 'without waiting for another event');
		close $_ for @socks;
	};
}

done_testing();
