#!/usr/bin/perl
# Every refusal of SPEC 17 with its exact body, the levels of each route class for each role,
# the skip list, roles from "role" and "roles" with configured names, the claims (exp, nbf,
# iat, iss, aud), hostile tokens (oversized, not UTF-8, malformed) as 401s, the refusal
# counters of /metrics and /metrics/prometheus, and no secret or token in the broker log.
use strict;
use warnings;
use Test::More;
use QueenTest;
use QueenAuth;

my $pg = start_pg();
my $secret = 'refusal-secret-6102-' . join('', map { chr(97 + rand 26) } 1 .. 16);
my $b = start_queend(JWT_ENABLED => 'true', JWT_ALGORITHM => 'HS256', JWT_SECRET => $secret,
	JWT_ISSUER => 'https://issuer.test', JWT_AUDIENCE => 'queen', LOG_LEVEL => 'debug',
	JWT_ROLE_READ_ONLY => 'viewer', JWT_SKIP_PATHS => '/health,/metrics,/metrics/prometheus');
my $now = time;
my %base = (iss => 'https://issuer.test', aud => 'queen', iat => $now, exp => $now + 600,
	sub => 'client-6102');
my @tokens;

sub tok {
	my ($claims, %o) = @_;
	my $t = QueenAuth::token($o{alg} // 'HS256', $o{key} // $secret, $claims, %o);
	push @tokens, $t;
	return $t;
}

# $tok: undef (no header), "Bearer ..." or "raw:..." (sent as is), else a token sent as Bearer.
my %expect = map { $_ => 0 } qw(missing invalid expired forbidden protected);
sub call {
	my ($method, $path, $tok, $body) = @_;
	my %h;
	$h{Authorization} = $tok =~ /^Bearer/ ? $tok : $tok =~ /^raw:(.*)$/s ? $1 : "Bearer $tok"
		if defined $tok;
	my ($s, $j, $h) = $b->request($method, $path, $body, \%h);
	$expect{forbidden}++ if $s == 403;
	return ($s, $j, $h);
}
my %reason = ('Authentication required' => 'missing', 'Invalid token' => 'invalid',
	'Token has expired' => 'expired', 'Token not yet valid' => 'expired');

sub refused {
	my ($tok, $status, $error, $name, %o) = @_;
	my ($s, $j, $h) = call($o{method} // 'GET', $o{path} // '/api/v1/resources/queues', $tok);
	$expect{ $reason{$error} }++ if $reason{$error};
	is($s, $status, "$name: $status");
	is_deeply($j, { error => $error }, "$name: body {\"error\":\"$error\"}");
	if ($status == 401) {
		is($h->{'www-authenticate'}, 'Bearer', "$name: WWW-Authenticate: Bearer");
	}
}

# Missing, invalid, expired, not yet valid.
refused(undef, 401, 'Authentication required', 'no Authorization header');
refused('Bearer ', 401, 'Authentication required', 'an empty bearer');
refused(undef, 401, 'Authentication required', 'an unknown route without a token',
	path => '/api/v1/no-such-route');
refused('not.a.token', 401, 'Invalid token', 'a malformed token');
refused(tok(\%base, key => 'wrong-secret'), 401, 'Invalid token', 'a bad signature');
refused(tok({ %base, iss => 'https://other.test' }), 401, 'Invalid token', 'another issuer');
refused(tok({ %base, aud => 'other' }), 401, 'Invalid token', 'another audience');
refused(tok({ %base, iat => $now + 3600 }), 401, 'Invalid token', 'iat an hour ahead');
refused(tok({ %base, exp => $now - 120 }), 401, 'Token has expired', 'exp two minutes ago');
refused(tok({ %base, nbf => $now + 120 }), 401, 'Token not yet valid', 'nbf in two minutes');
refused(tok(\%base, alg => 'none', sig => ''), 401, 'Invalid token', 'alg none');
refused('Bearer ' . ('a' x 9000) . '.b.c', 401, 'Invalid token', 'a 9000-byte token');
{
	# HTTP::Tiny sends no such header: straight onto the socket.
	my ($s8, $j8, $h8) = $b->raw("GET /api/v1/resources/queues HTTP/1.1\r\nHost: x\r\n" .
		"Authorization: Bearer \xff\xfe.\xc3\x28.abc\r\nConnection: close\r\n\r\n");
	$expect{invalid}++;
	is($s8, 401, 'a token that is not UTF-8: 401');
	is_deeply($j8, { error => 'Invalid token' }, '... Invalid token');
	is($h8->{'www-authenticate'}, 'Bearer', '... WWW-Authenticate: Bearer');
}
refused(tok("{\"sub\":\"\xff\",\"role\":\"admin\"}"), 401, 'Invalid token',
	'claims that are not UTF-8');

# Within the skew (30 s) a just-expired token still passes; aud may be an array.
my ($s) = call('GET', '/api/v1/resources/queues', tok({ %base, role => 'admin', exp => $now - 10 }));
is($s, 200, 'exp 10 s ago is within the 30 s skew');
($s) = call('GET', '/api/v1/resources/queues', tok({ %base, role => 'admin', aud => [ 'x', 'queen' ] }));
is($s, 200, 'aud as an array holding the audience');
($s) = call('GET', '/api/v1/resources/queues', 'raw:' . tok({ %base, role => 'admin' }));
is($s, 200, 'a bare token without "Bearer " is accepted');
($s) = call('GET', '/api/v1/no-such-route', tok({ %base, role => 'admin' }));
is($s, 404, 'an unknown route with a valid token: 404');

# Levels: one route of each class, each role.
my $q = 'auth-levels';
my %route = (
	read => [ 'GET', '/api/v1/resources/queues' ],
	write => [ 'POST', '/api/v1/push', to_json({ items => [ { queue => $q, payload => 1 } ] }) ],
	rw => [ 'GET', "/api/v1/pop/queue/$q?autoAck=true" ],
	admin => [ 'GET', '/api/v1/system/maintenance' ],
);
my %allowed = (
	admin => [qw(read write rw admin)],
	'read-write' => [qw(read write rw)],
	viewer => [qw(read)],
	'write-only' => [qw(write)],
	'read-only' => [],	# renamed to viewer: the default name is no role now
	'' => [],
);
for my $role (sort keys %allowed) {
	my %ok = map { $_ => 1 } @{ $allowed{$role} };
	my $t = tok({ %base, length $role ? (role => $role) : () });
	for my $class (qw(read write rw admin)) {
		my ($s2, $j) = call($route{$class}[0], $route{$class}[1], $t, $route{$class}[2]);
		if ($ok{$class}) {
			ok($s2 >= 200 && $s2 < 300, "role '$role' may use a $class route ($s2)");
		} else {
			is($s2, 403, "role '$role' may not use a $class route");
			is_deeply($j, { error => 'Insufficient permissions' }, '... body') if $s2 == 403;
		}
	}
}
($s) = call('GET', '/api/v1/resources/queues', tok({ %base, roles => [ 'nothing', 'viewer' ] }));
is($s, 200, 'a role from the roles array');
($s) = call('GET', '/api/v1/resources/queues', tok({ %base, role => [ 'admin' ] }));
is($s, 403, 'a role claim that is not a string counts as no role');
($s) = call('DELETE', "/api/v1/resources/queues/$q", tok({ %base, role => 'read-write' }));
is($s, 403, 'DELETE of a queue needs admin');
($s) = call('DELETE', "/api/v1/resources/queues/$q", tok({ %base, role => 'admin' }));
is($s, 200, '... which may');

# The skip list: public paths answer without a token; / is no longer in it here.
($s) = $b->get('/health');
is($s, 200, '/health is public');
my ($sm, $m) = $b->get('/metrics');
is($sm, 200, '/metrics is public');
refused(undef, 401, 'Authentication required', '/ is not in this skip list', path => '/');

# The counters.
$expect{missing}--;	# the refusal of / came after the snapshot
is_deeply($m->{authRefused}, \%expect, '/metrics counts refusals by reason')
	or diag(to_json($m->{authRefused}));
my (undef, undef, undef, $prom) = $b->get('/metrics/prometheus');
like($prom, qr/^queen_auth_refused_total\{reason="forbidden"\} \d+$/m,
	'/metrics/prometheus: queen_auth_refused_total by reason');
like($prom, qr/^queen_auth_refused_total\{reason="missing"\} [1-9]/m, '... missing counted');

# No secret and no token in the broker log (debug level).
$b->stop;
my $log = QueenTest::_slurp($b->{log});
ok(length $log, 'the broker wrote a log');
unlike($log, qr/\Q$secret\E/, 'the secret is in no log line');
my @seen = grep { index($log, (split /\./, $_)[2] // $_) >= 0 } @tokens;
is(scalar @seen, 0, 'no token (nor its signature) is in any log line');

done_testing;
