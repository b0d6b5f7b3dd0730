#!/usr/bin/perl
# Protected mode (SPEC 17): with JWT off and the broker on a non-loopback address, a peer that
# is not loopback gets the 403 of SPEC 17 (counted as "protected"), loopback peers are served,
# /health stays public, start-up warns; QUEEN_PROTECTED_MODE=off lifts it, a bad value is a
# start-up error. The non-loopback peer lives in a network namespace joined to this host by a
# veth pair that the test makes (and removes); without the privilege for that, those cases
# are skipped.
use strict;
use warnings;
use Test::More;
use QueenTest;

my $pg = start_pg();
my ($st, $out) = run_queend(['--check-config'], QUEEN_PROTECTED_MODE => 'sometimes');
isnt($st, 0, 'QUEEN_PROTECTED_MODE=sometimes is a start-up error');
like($out, qr/QUEEN_PROTECTED_MODE/, '... naming the variable');

# Loopback-only broker (what quickstart runs): no warning.
my $lo = start_queend();
my ($s) = $lo->get('/api/v1/resources/queues');
is($s, 200, 'a broker on 127.0.0.1 serves loopback peers');
$lo->stop;
unlike(QueenTest::_slurp($lo->{log}), qr/protected mode/, '... and does not warn');

my $b = start_queend(HOST => '0.0.0.0');
like(QueenTest::_slurp($b->{log}), qr/protected mode: JWT authentication is off.*QUEEN_PROTECTED_MODE=off/,
	'a broker on 0.0.0.0 without JWT warns at start-up');
($s) = $b->get('/api/v1/resources/queues');
is($s, 200, 'loopback peers are always served');

my $tag = $$ % 200 + 20;
my ($ns, $veth, $peer) = ("qns$$", "qva$$", "qvb$$");
my ($host_ip, $ns_ip) = ("10.254.$tag.1", "10.254.$tag.2");
my $made;

sub sh { return system("@_ >/dev/null 2>&1") == 0 }

END {
	local $?;
	if ($made) {
		system("ip netns del $ns >/dev/null 2>&1");
		system("ip link del $veth >/dev/null 2>&1");
	}
}

SKIP: {
	skip 'cannot make a network namespace (needs root and CAP_NET_ADMIN): the non-loopback '
	    . 'peer cases are not run', 9
	    unless $> == 0 && sh('ip netns add', $ns);
	$made = 1;
	skip 'cannot make a veth pair in this kernel: non-loopback cases not run', 9
	    unless sh('ip link add', $veth, 'type veth peer name', $peer)
	    && sh('ip link set', $peer, 'netns', $ns)
	    && sh('ip addr add', "$host_ip/30", 'dev', $veth) && sh('ip link set', $veth, 'up')
	    && sh('ip netns exec', $ns, 'ip addr add', "$ns_ip/30", 'dev', $peer)
	    && sh('ip netns exec', $ns, 'ip link set', $peer, 'up')
	    && sh('ip netns exec', $ns, 'ip link set lo up');
	my $from_ns = sub {
		my ($broker, $path) = @_;
		my $url = "http://$host_ip:" . $broker->port . $path;
		my $o = `ip netns exec $ns curl -s -m 5 -w '\\n%{http_code}' '$url' 2>/dev/null`;
		my ($body, $code) = $o =~ /^(.*)\n(\d+)$/s;
		return ($code // 0, $body // '');
	};
	my ($code, $body) = wait_until(sub { my @r = $from_ns->($b, '/health'); $r[0] ? \@r : 0 }, 10)
	    ? $from_ns->($b, '/api/v1/resources/queues') : (0, '');
	is($code, 403, 'a non-loopback peer gets 403');
	is_deeply(from_json($body),
	    { error => 'protected mode: enable JWT authentication or set QUEEN_PROTECTED_MODE=off' },
	    '... with the message of SPEC 17');
	($code) = $from_ns->($b, '/api/v1/push');
	is($code, 403, '... on every route');
	($code) = $from_ns->($b, '/health');
	is($code, 200, '/health stays public for probes');
	my (undef, $m) = $b->get('/metrics');
	is($m->{authRefused}{protected}, 2, '/metrics counts the refusals as protected');

	my $off = start_queend(HOST => '0.0.0.0', QUEEN_PROTECTED_MODE => 'off');
	($code) = $from_ns->($off, '/api/v1/resources/queues');
	is($code, 200, 'QUEEN_PROTECTED_MODE=off serves non-loopback peers');
	$off->stop;
	unlike(QueenTest::_slurp($off->{log}), qr/protected mode/, '... and does not warn');

	my $secret = 'protected-6103-secret';
	my $jwt = start_queend(HOST => '0.0.0.0', JWT_ENABLED => 'true', JWT_SECRET => $secret);
	($code, $body) = $from_ns->($jwt, '/api/v1/resources/queues');
	is($code, 401, 'with JWT on, a non-loopback peer meets authentication, not protected mode');
	is_deeply(from_json($body), { error => 'Authentication required' }, '... 401 body');
	$jwt->stop;
}

done_testing;
