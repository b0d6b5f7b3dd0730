#!/usr/bin/perl
# JWT authentication with every algorithm of SPEC 17: each fixed JWT_ALGORITHM with its key
# (JWT_SECRET or JWT_PUBLIC_KEY as PEM text and as @file) accepts the tokens it signs and
# refuses the others; auto takes the token's algorithm among the configured keys; a JWKS
# file and a JWKS URL (served by a tiny server of this test) carry RSA, EC and Ed25519 keys
# chosen by kid; an unknown kid refetches the URL (at most every 5 s).
use strict;
use warnings;
use Test::More;
use QueenTest;
use QueenAuth;
use Time::HiRes qw(time);

plan skip_all => 'the openssl command line is not installed' unless QueenAuth::have_openssl();
my $pg = start_pg();
my $dir = File::Temp::tempdir('authXXXX', DIR => '/tmp', CLEANUP => 1);
my $k = QueenAuth::keys($dir);
my $secret = 'hs-secret-6101-' . join('', map { chr(97 + rand 26) } 1 .. 20);
my $now = time;
my %claims = (sub => 'svc-6101', role => 'admin', iat => $now, exp => $now + 600);

sub status_with {
	my ($b, $tok) = @_;
	my ($s) = $b->request('GET', '/api/v1/resources/queues', undef,
		{ Authorization => "Bearer $tok" });
	return $s;
}

my %signer = (
	HS256 => $secret, HS384 => $secret, HS512 => $secret,
	RS256 => $k->{rsa}{priv}, RS384 => $k->{rsa}{priv}, RS512 => $k->{rsa}{priv},
	ES256 => $k->{ec}{priv}, EdDSA => $k->{ed}{priv},
);
my %pub = (RS256 => 'rsa', RS384 => 'rsa', RS512 => 'rsa', ES256 => 'ec', EdDSA => 'ed');

for my $alg (qw(HS256 HS384 HS512 RS256 RS384 RS512 ES256 EdDSA)) {
	my %env = (JWT_ENABLED => 'true', JWT_ALGORITHM => $alg);
	if ($alg =~ /^HS/) {
		$env{JWT_SECRET} = $secret;
	} else {
		# PEM text for RS256 and ES256, @file for the others: both forms are read.
		$env{JWT_PUBLIC_KEY} = $alg =~ /^(RS256|ES256)$/ ? $k->{ $pub{$alg} }{pem}
			: '@' . $k->{ $pub{$alg} }{pub};
	}
	my $b = start_queend(%env);
	is(status_with($b, QueenAuth::token($alg, $signer{$alg}, \%claims)), 200,
	    "$alg: a token it signs is accepted");
	my $other = $alg eq 'HS256' ? 'HS512' : 'HS256';
	is(status_with($b, QueenAuth::token($other, $signer{$other}, \%claims)), 401,
	    "$alg: a $other token is refused (fixed algorithm)");
	my $tampered = QueenAuth::token($alg, $signer{$alg}, \%claims);
	$tampered =~ s/\.([^.]+)\.([^.]+)$/'.' . QueenAuth::b64url('{"sub":"x","role":"admin"}') . ".$2"/e;
	is(status_with($b, $tampered), 401, "$alg: a changed payload breaks the signature");
	$b->stop;
}

# Algorithm confusion: an HS256 token whose "secret" is the public key text, against a broker
# whose key is that public key.
{
	my $b = start_queend(JWT_ENABLED => 'true', JWT_ALGORITHM => 'auto',
		JWT_PUBLIC_KEY => $k->{rsa}{pem});
	is(status_with($b, QueenAuth::token('RS256', $k->{rsa}{priv}, \%claims)), 200,
	    'auto with a public key: RS256 accepted');
	is(status_with($b, QueenAuth::token('HS256', $k->{rsa}{pem}, \%claims)), 401,
	    'auto with a public key: HS256 signed with the public key text is refused');
	is(status_with($b, QueenAuth::token('none', '', \%claims)), 401, 'alg none is refused');
	$b->stop;
}

# auto: the secret and a JWKS file with one key of each kind, chosen by kid.
my @jwk = (
	{ %{ $k->{rsa}{jwk} }, kid => 'rsa-1', use => 'sig' },
	{ %{ $k->{ec}{jwk} }, kid => 'ec-1' },
	{ %{ $k->{ed}{jwk} }, kid => 'ed-1', alg => 'EdDSA' },
);
QueenAuth::write_file("$dir/jwks.json", QueenAuth::jwks_json(@jwk));
{
	my $b = start_queend(JWT_ENABLED => 'true', JWT_ALGORITHM => 'auto', JWT_SECRET => $secret,
		JWT_JWKS_FILE => "$dir/jwks.json");
	for my $c ([ 'HS384', undef ], [ 'RS512', 'rsa-1' ], [ 'ES256', 'ec-1' ],
		   [ 'EdDSA', 'ed-1' ], [ 'RS256', undef ]) {
		my ($alg, $kid) = @$c;
		is(status_with($b, QueenAuth::token($alg, $signer{$alg}, \%claims,
		    defined $kid ? (kid => $kid) : ())), 200,
		    "auto + JWKS file: $alg" . (defined $kid ? " kid $kid" : ' without kid') .
		    ' accepted');
	}
	is(status_with($b, QueenAuth::token('ES256', $k->{ec}{priv}, \%claims, kid => 'rsa-1')),
	    401, 'a kid naming a key of another kind is refused');
	is(status_with($b, QueenAuth::token('RS256', $k->{rsa}{priv}, \%claims, kid => 'nope')),
	    401, 'an unknown kid is refused (no URL to refetch)');
	$b->stop;
}

# The JWKS URL: fetched at start, an unknown kid refetches it.
{
	my $file = "$dir/served.json";
	QueenAuth::write_file($file, QueenAuth::jwks_json($jwk[0]));
	my $srv = QueenAuth::serve_jwks($file);
	my $b = start_queend(JWT_ENABLED => 'true', JWT_ALGORITHM => 'auto',
		JWT_JWKS_URL => $srv->{url}, JWT_JWKS_TIMEOUT_MS => 2000);
	is(QueenAuth::hits($file), 1, 'the JWKS URL is fetched once at start');
	is(status_with($b, QueenAuth::token('RS256', $k->{rsa}{priv}, \%claims, kid => 'rsa-1')),
	    200, 'JWKS URL: RS256 kid rsa-1 accepted');
	is(status_with($b, QueenAuth::token('ES256', $k->{ec}{priv}, \%claims, kid => 'ec-1')),
	    401, 'JWKS URL: kid ec-1 not served yet: refused');
	# Rotation at the issuer: the new key appears; the next unknown kid after 5 s refetches.
	QueenAuth::write_file($file, QueenAuth::jwks_json(@jwk));
	my $ok = wait_until(sub {
		status_with($b, QueenAuth::token('ES256', $k->{ec}{priv}, \%claims, kid => 'ec-1'))
		    == 200 }, 12, 1);
	ok($ok, 'JWKS URL: after rotation an unknown kid refetches and is accepted');
	my $hits = QueenAuth::hits($file);
	for (1 .. 5) {
		status_with($b, QueenAuth::token('RS256', $k->{rsa}{priv}, \%claims, kid => "x$_"));
	}
	cmp_ok(QueenAuth::hits($file) - $hits, '<=', 1,
	    'five unknown kids in a row refetch at most once (5 s throttle)');
	$b->stop;
	QueenAuth::stop_server($srv);
}

# A slow JWKS server: a token with an unknown kid waits at most JWT_JWKS_TIMEOUT_MS for the
# refetch, and is refused; known kids are served meanwhile.
{
	my $file = "$dir/slow.json";
	QueenAuth::write_file($file, QueenAuth::jwks_json($jwk[0]));
	my $srv = QueenAuth::serve_jwks($file, delay => 4, delay_after => 1);
	my $b = start_queend(JWT_ENABLED => 'true', JWT_ALGORITHM => 'auto',
		JWT_JWKS_URL => $srv->{url}, JWT_JWKS_TIMEOUT_MS => 1000);
	my $started = time;
	my $left = 5.3 - (time - $started);
	select(undef, undef, undef, $left) if $left > 0;	# past the 5 s refetch throttle
	my $t0 = time;
	is(status_with($b, QueenAuth::token('ES256', $k->{ec}{priv}, \%claims, kid => 'slow')),
	    401, 'slow JWKS: an unknown kid is refused');
	my $took = time - $t0;
	cmp_ok($took, '<', 3.5, sprintf('... after %.1f s: the wait is bounded by '
	    . 'JWT_JWKS_TIMEOUT_MS, not the 4 s fetch', $took));
	is(status_with($b, QueenAuth::token('RS256', $k->{rsa}{priv}, \%claims, kid => 'rsa-1')),
	    200, '... and known kids are still served');
	$b->stop;
	QueenAuth::stop_server($srv);
}

# Start-up failures name the variable.
{
	my ($st, $out) = run_queend([], JWT_ENABLED => 'true', JWT_ALGORITHM => 'auto',
		JWT_JWKS_URL => 'http://127.0.0.1:' . free_port() . '/jwks.json',
		JWT_JWKS_TIMEOUT_MS => 500);
	isnt($st, 0, 'an unreachable JWKS URL fails the start');
	like($out, qr/JWT_JWKS_URL/, '... naming JWT_JWKS_URL');
	QueenAuth::write_file("$dir/bad.json", '{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}');
	($st, $out) = run_queend([], JWT_ENABLED => 'true', JWT_ALGORITHM => 'auto',
		JWT_JWKS_FILE => "$dir/bad.json");
	isnt($st, 0, 'a JWKS file without a usable key fails the start');
	like($out, qr/JWT_JWKS_FILE/, '... naming JWT_JWKS_FILE');
	QueenAuth::write_file("$dir/junk.json", 'not json');
	($st, $out) = run_queend([], JWT_ENABLED => 'true', JWT_JWKS_FILE => "$dir/junk.json",
		JWT_ALGORITHM => 'auto');
	like($out, qr/JWT_JWKS_FILE/, 'a malformed JWKS file fails the start naming it');
	($st, $out) = run_queend([], JWT_ENABLED => 'true');
	isnt($st, 0, 'JWT on without key material fails the start');
	like($out, qr/JWT_ENABLED.*JWT_SECRET/, '... saying what to set');
	($st, $out) = run_queend([], JWT_ENABLED => 'true', JWT_PUBLIC_KEY => 'garbage',
		JWT_ALGORITHM => 'RS256');
	like($out, qr/JWT_PUBLIC_KEY/, 'a bad PEM fails the start naming JWT_PUBLIC_KEY');
	($st, $out) = run_queend([], JWT_ENABLED => 'true', JWT_ALGORITHM => 'ES256',
		JWT_SECRET => $secret);
	like($out, qr/JWT_ALGORITHM/, 'ES256 with only a secret fails the start');
	($st, $out) = run_queend([], JWT_ENABLED => 'maybe');
	like($out, qr/JWT_ENABLED/, 'JWT_ENABLED=maybe is a start-up error');
	unlike($out, qr/\Q$secret\E/, 'the secret appears in no start-up message');
}

done_testing;
