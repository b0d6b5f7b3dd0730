#!/bin/bash
# contrib/limits-load.sh: the load behind the limits of SPEC 22 (issue 9's targets), on a
# throwaway PostgreSQL and broker of its own, loopback only, bounded in count and time.
#
#   contrib/limits-load.sh [--longpolls N] [--seconds S] [--only longpoll|fairness|index]
#                          [--reused] [--memory BYTES] [--partitions P]
#
# longpoll: N (10000) long-polls parked at once: the broker's RSS while they are parked, the
#           latency of pushes answered meanwhile (p50/p99/max of 200), then every client
#           goes away at once: how long until the broker has released them all. With
#           --reused each connection first has one request answered (GET /health), as a
#           client that polls again on its keep-alive connection: libmicrohttpd then holds
#           all of the connection's memory (QUEEN_CONNECTION_MEMORY_BYTES) in RSS. --memory
#           sets that memory, with the head limits it holds (URL an eighth of it, header
#           bytes a quarter, a field and a query parameter per 512 bytes).
# fairness: batch-1 pushes of 4 clients for S (10) seconds, alone and then while one more
#           client pushes 64 MiB bodies in a loop: p50/p99 of each and the ratio; those
#           beside the bodies split by what the heavy client's body was going through (sent,
#           or stored); then, as a control, beside a transaction that only holds its id.
# index:    two brokers on the database; three times over, P (20000) partitions of a new
#           queue are pushed on the first and read by a group on the second, then the queue
#           is deleted on the first: the second's partition index and RSS before and after
#           (its index resync runs every second here).
#
# QUEEND (default build/src/queend) is the broker; PG_BINDIR as for the tests. The open file
# limit is raised to the hard limit (each parked long-poll holds a socket on both sides).
set -euo pipefail
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
root=$(cd "$(dirname "$0")/.." && pwd)
export QUEEND=${QUEEND:-$root/build/src/queend}
exec perl -x -I "$root/t/lib" "$0" "$@"

#!perl
use strict;
use warnings;
use Getopt::Long;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(time sleep);
use QueenTest;

my ($n, $secs, $only, $reused, $nparts, $memory) = (10000, 10, '', 0, 20000, 0);
GetOptions('longpolls=i' => \$n, 'seconds=i' => \$secs, 'only=s' => \$only,
	'reused' => \$reused, 'partitions=i' => \$nparts, 'memory=i' => \$memory)
	or die "usage: $0 [--longpolls N] [--seconds S] [--only longpoll|fairness|index] " .
	"[--reused] [--memory BYTES] [--partitions P]\n";
my %head = $memory ? (QUEEN_CONNECTION_MEMORY_BYTES => $memory, QUEEN_MAX_URL_BYTES =>
	int($memory / 8), QUEEN_MAX_HEADER_BYTES => int($memory / 4), QUEEN_MAX_HEADERS =>
	int($memory / 512), QUEEN_MAX_QUERY_PARAMS => int($memory / 512)) : ();
$nparts = 1000 if $nparts < 1000;
$nparts = 1000000 if $nparts > 1000000;
$n = 1 if $n < 1;
$n = 50000 if $n > 50000;
$secs = 60 if $secs > 60;

sub pct {
	my ($p, @v) = @_;
	@v = sort { $a <=> $b } @v;
	return @v ? $v[ int($p / 100 * $#v + 0.5) ] : 0;
}
sub rss_mib {
	my ($pid, $what) = @_;
	open my $fh, '<', "/proc/$pid/status" or return -1;
	while (<$fh>) { return $1 / 1024 if /^\Q$what\E:\s+(\d+) kB/ }
	return -1;
}
sub say_ { printf "%-44s %s\n", @_ }

# One keep-alive connection that sends each request in one write (HTTP::Tiny writes headers
# and body apart, and the delayed ACK of the second write then costs 40 ms a request).
sub conn { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $_[0]->port,
	Proto => 'tcp') or die "connect: $!\n" }
sub send_post {
	my ($sock, $path, $body) = @_;
	return syswrite($sock, "POST $path HTTP/1.1\r\nHost: x\r\n" .
		"Content-Type: application/json\r\nContent-Length: " . length($body) .
		"\r\n\r\n" . $body);
}
sub post { send_post(@_) or return 0; return answer($_[0]) }
# Reads one answer off a keep-alive connection; returns its status (0: connection closed).
sub answer {
	my ($sock) = @_;
	my $buf = '';
	while (1) {
		my $r = sysread($sock, $buf, 65536, length $buf);
		return 0 unless $r;
		my $h = index($buf, "\r\n\r\n");
		next if $h < 0;
		my ($len) = substr($buf, 0, $h) =~ /content-length:\s*(\d+)/i;
		next if length($buf) < $h + 4 + ($len // 0);
		my ($status) = $buf =~ m{^HTTP/1\.1 (\d+)};
		return $status;
	}
}
sub push1 { post($_[0], '/api/v1/push', QueenTest::to_json({ items => [ $_[1] ] })) }

my $pg = start_pg();

if (!$only || $only eq 'longpoll') {
	my $q = start_queend(QUEEN_MAX_LONGPOLLS => $n, LOG_LEVEL => 'warn', %head);
	my $parked = sub { my (undef, $m) = $q->get('/metrics'); $m->{longPoll}{parked} // -1 };
	$q->push_n('lp-other', 1);
	my $rss0 = rss_mib($q->pid, 'VmRSS');
	my @socks;
	my $t0 = time;
	while (@socks < $n) {
		my $n0 = @socks;
		# In steps, so that the listen backlog never overflows.
		for (1 .. ($n - @socks < 500 ? $n - @socks : 500)) {
			my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->port,
				Proto => 'tcp') or die "connect after " . scalar(@socks) . ": $!\n";
			push @socks, $s;
		}
		if ($reused) {
			syswrite($_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n") for @socks[$n0 .. $#socks];
			answer($_) for @socks[$n0 .. $#socks];
		}
		syswrite($_, "GET /api/v1/pop/queue/lp-idle?wait=true&timeout=600000 HTTP/1.1\r\n" .
			"Host: x\r\n\r\n") for @socks[$n0 .. $#socks];
		my $want = @socks;
		wait_until(sub { $parked->() >= $want }, 60, 0.02) or die "only " . $parked->() .
			" of $want parked\n";
	}
	say_('long-polls parked', sprintf('%d in %.1f s%s', $n, time - $t0,
		$reused ? ', each on a connection that served one request' : ''));
	my $rss = rss_mib($q->pid, 'VmRSS');
	say_('broker RSS before / while parked', sprintf('%.1f MiB / %.1f MiB', $rss0, $rss));
	my @lat;
	my $c = conn($q);
	# Warm-up, as in the fairness phase: each database connection compiles the push
	# function at its first call, a one-time cost that is not the parked pops'.
	push1($c, { queue => 'lp-other', transactionId => "w$_" }) for 1 .. 100;
	for my $i (1 .. 200) {
		my $t = time;
		my $s = push1($c, { queue => 'lp-other', transactionId => "o$i" });
		die "push answered $s\n" unless $s == 201;
		push @lat, (time - $t) * 1000;
	}
	say_('push latency while parked (200, ms)', sprintf('p50 %.2f  p99 %.2f  max %.2f',
		pct(50, @lat), pct(99, @lat), pct(100, @lat)));
	say_('broker RSS after the pushes (peak)', sprintf('%.1f MiB (%.1f MiB)',
		rss_mib($q->pid, 'VmRSS'), rss_mib($q->pid, 'VmHWM')));
	# Clients go away a tenth at a time, then all the rest at once: how long until the
	# broker has released each group (the slowest group is the figure).
	my @took;
	for my $group (1 .. 10) {
		my $k = $group < 10 ? int($n / 10) : scalar @socks;
		my $left = @socks - $k;
		my $t_close = time;
		close $_ for splice(@socks, 0, $k);
		wait_until(sub { $parked->() <= $left }, 60, 0.005)
			or die "not released within 60 s: " . $parked->() . " still parked\n";
		push @took, (time - $t_close) * 1000;
		sleep 0.5;
	}
	say_('clients gone: released within (ms)', sprintf('a tenth at a time: max %.0f, mean %.0f',
		pct(100, @took), eval { my $t = 0; $t += $_ for @took; $t / @took }));
	my $socks2 = [];
	for (1 .. $n) {
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->port,
			Proto => 'tcp') or last;
		syswrite($s, "GET /api/v1/pop/queue/lp-idle?wait=true&timeout=600000 HTTP/1.1\r\n" .
			"Host: x\r\n\r\n");
		push @$socks2, $s;
		wait_until(sub { $parked->() >= @$socks2 }, 60, 0.02) if @$socks2 % 500 == 0;
	}
	wait_until(sub { $parked->() >= @$socks2 }, 60, 0.02);
	my $t_all = time;
	close $_ for @$socks2;
	my $t_closed = time;
	wait_until(sub { $parked->() == 0 }, 60, 0.005);
	say_('clients gone: released within (ms)', sprintf('all %d at once: %.0f (the last %.0f ' .
		'after its close)', scalar @$socks2, (time - $t_all) * 1000, (time - $t_closed) * 1000));
	my (undef, $m) = $q->get('/metrics');
	say_('abandoned (from /metrics)', $m->{longPoll}{abandoned});
	say_('broker RSS after the release', sprintf('%.1f MiB', rss_mib($q->pid, 'VmRSS')));
	$q->stop;
}

if (!$only || $only eq 'fairness') {
	my $q = start_queend(LOG_LEVEL => 'warn');
	# Four clients, each pushing one item at a time, for $secs seconds: [start, ms] of each.
	my $light = sub {
		my @kids = map { my $c = $_; bg(sub {
			my (@l, $i);
			my $end = time + $secs;
			my $sock = conn($q);
			while (time < $end) {
				my $t = time;
				my $s = push1($sock, { queue => "light-$c", partition => 'p' . ($i++ % 8) });
				push @l, [ $t, (time - $t) * 1000 ] if $s == 201;
			}
			return \@l;
		}) } 1 .. 4;
		return map { @{ $_->result($secs + 120) // [] } } @kids;
	};
	my $line = sub {
		my ($what, @l) = @_;
		my @v = map { $_->[1] } @l;
		say_($what, sprintf('p50 %.2f  p99 %.2f  (%d pushes)', pct(50, @v), pct(99, @v),
			scalar @v));
		return pct(99, @v);
	};
	$light->() for 1;	# warm-up: queues and partitions exist, plans are cached
	my @base = $light->();
	# The heavy client: bodies just under QUEEN_MAX_BODY_BYTES (64 MiB), 10,000 items; when
	# each was sent, written (the broker has read most of it) and answered.
	my $pad = 'h' x 6600;
	my $body = '{"items":[' . join(',', map { qq({"queue":"heavy","partition":"h) . ($_ % 16) .
		qq(","payload":{"pad":"$pad"}}) } 1 .. 10000) . ']}';
	my $heavy = bg(sub {
		my ($ok, $other, @t) = (0, 0);
		my $end = time + $secs + 1;
		my $sock = conn($q);
		while (time < $end) {
			my $t0 = time;
			my $sent = send_post($sock, '/api/v1/push', $body);
			my $written = time;
			my $s = $sent ? answer($sock) : 0;
			my $t1 = time;
			$sock = conn($q) unless $s;
			$s == 201 ? $ok++ : $other++;
			push @t, [ $t0, $written, $t1 ];
		}
		return [ $ok, $other, \@t ];
	});
	sleep 1;
	my @load = $light->();
	my $h = $heavy->result($secs + 300) // [ 0, 0, [] ];
	say_('heavy client', sprintf('%d bodies of %.1f MiB stored, %d refused', $h->[0],
		length($body) / 1048576, $h->[1]));
	my $b99 = $line->('batch-1 push alone (ms)', @base);
	my $l99 = $line->('batch-1 push beside 64 MiB bodies (ms)', @load);
	say_('p99 ratio (target < 2)', sprintf('%.2f', $b99 ? $l99 / $b99 : 0));
	# Where they were slow: while a body was being sent (the broker reads it) or while the
	# broker parsed and stored it.
	my (@sending, @storing);
	for my $l (@load) {
		my ($b) = grep { $l->[0] >= $_->[0] && $l->[0] < $_->[2] } @{ $h->[2] };
		next unless $b;
		push @{ $l->[0] < $b->[1] ? \@sending : \@storing }, $l;
	}
	$line->('  ... while a body is sent (ms)', @sending);
	$line->('  ... while it is stored (ms)', @storing);
	# A control with no work at all beside: a transaction that holds a transaction id open
	# for the whole window, as a large push does while it runs. Before schema 022 each push
	# updated its partition's row and PostgreSQL could not prune those versions meanwhile;
	# now a push only locks the row, and these are as fast as alone.
	my $hold = bg(sub { $pg->psql("BEGIN; SELECT txid_current(); SELECT pg_sleep($secs + 2); " .
		"COMMIT"); 1 });
	sleep 1;
	$line->('batch-1 push beside an open transaction (ms)', $light->());
	$hold->result($secs + 60);
	$q->stop;
}

if (!$only || $only eq 'index') {
	my $A = start_queend(QUEEN_INDEX_RESYNC_MS => 1000, LOG_LEVEL => 'warn');
	my $B = start_queend(QUEEN_INDEX_RESYNC_MS => 1000, LOG_LEVEL => 'warn');
	my $ix = sub {
		my (undef, $m) = $B->get('/metrics');
		my $i = $m->{index} // {};
		sprintf('%s partitions, %s group slots, RSS %.1f MiB', $i->{partitions} // '?',
			$i->{groupSlots} // '?', rss_mib($B->pid, 'VmRSS'));
	};
	say_('second broker at start', sprintf('RSS %.1f MiB', rss_mib($B->pid, 'VmRSS')));
	for my $c (1 .. 3) {
		my $queue = "index-$c";
		for (my $i = 0; $i < $nparts; $i += 1000) {
			my ($s) = $A->push_items(map { +{ queue => $queue, partition => "p$_",
				payload => 1 } } $i .. $i + 999);
			die "push answered $s\n" unless $s == 201;
		}
		for (1 .. $nparts / 64 + 5) {
			my ($s, $b) = $B->pop($queue, consumerGroup => "g$c", batch => 1000,
				autopilot => 'true', subscriptionMode => 'all');
			last unless $s == 200;
			$B->ack_all($b);
		}
		sleep 1.5;
		my $before = $ix->();
		$A->del("/api/v1/resources/queues/$queue");
		sleep 2.5;
		say_("cycle $c: second broker before / after",
			"$before / " . $ix->());
	}
	$A->stop;
	$B->stop;
}
