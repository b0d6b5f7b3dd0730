#!/usr/bin/perl
# SIGHUP re-reads the JWT key material and role names (SPEC 17, DESIGN "Signals"): a rotated
# JWKS file and a new role name apply to the next requests, a bad JWKS file keeps the keys in
# use and logs why, and a long-poll parked across the reload is answered normally.
use strict;
use warnings;
use Test::More;
use QueenTest;
use QueenAuth;

plan skip_all => 'the openssl command line is not installed' unless QueenAuth::have_openssl();
my $pg = start_pg();
my $dir = File::Temp::tempdir('reloadXXXX', DIR => '/tmp', CLEANUP => 1);
my $a = QueenAuth::keys($dir, 'a');
my $bk = QueenAuth::keys($dir, 'b');
my $conf = "$dir/queend.conf";
my $jwks = "$dir/jwks.json";

sub write_conf {
	my ($admin) = @_;
	QueenAuth::write_file($conf, "JWT_ENABLED = true\nJWT_ALGORITHM = auto\n" .
		"JWT_JWKS_FILE = $jwks\nJWT_ROLE_ADMIN = $admin\n");
}
write_conf('boss');
QueenAuth::write_file($jwks, QueenAuth::jwks_json({ %{ $a->{rsa}{jwk} }, kid => 'a' }));
my $b = start_queend(QUEEN_CONFIG => $conf, LOG_LEVEL => 'info');
my $now = time;
sub tok {
	my ($k, $kid, $role) = @_;
	return QueenAuth::token('RS256', $k->{rsa}{priv},
		{ sub => 's', role => $role, iat => $now, exp => $now + 600 }, kid => $kid);
}
sub st {
	my ($tok) = @_;
	return ($b->request('GET', '/api/v1/system/maintenance', undef,
		{ Authorization => "Bearer $tok" }))[0];
}
sub hup_and_wait {
	my ($pattern) = @_;
	my $before = $b->log_count($pattern);
	kill 'HUP', $b->pid;
	return wait_until(sub { $b->log_count($pattern) > $before }, 10);
}

is(st(tok($a, 'a', 'boss')), 200, 'key a, role boss (the configured admin name): 200');
is(st(tok($bk, 'b', 'boss')), 401, 'key b is not known yet');

# A long-poll parked across the reload.
my $poll = bg(sub {
	my ($s) = $b->request('GET', '/api/v1/pop/queue/reload-q?wait=true&timeout=4000', undef,
		{ Authorization => 'Bearer ' . tok($a, 'a', 'boss') });
	return $s;
});
ok(wait_until(sub { ((($b->get('/metrics'))[1] // {})->{longPoll}{parked} // 0) >= 1 }, 20),
	'a long-poll is parked');

QueenAuth::write_file($jwks, QueenAuth::jwks_json({ %{ $bk->{rsa}{jwk} }, kid => 'b' }));
ok(hup_and_wait(qr/JWT keys and role names reloaded/), 'SIGHUP: the keys are reloaded')
	or diag($b->log_tail);
is(st(tok($bk, 'b', 'boss')), 200, 'after the reload key b is accepted');
is(st(tok($a, 'a', 'boss')), 401, '... and key a, gone from the file, refused');

QueenAuth::write_file($jwks, '{"keys": [ broken');
ok(hup_and_wait(qr/keeping the running JWT keys: JWT_JWKS_FILE/),
	'a broken JWKS file at reload is logged, naming JWT_JWKS_FILE');
is(st(tok($bk, 'b', 'boss')), 200, '... and the keys in use are kept');

write_conf('chief');
QueenAuth::write_file($jwks, QueenAuth::jwks_json({ %{ $bk->{rsa}{jwk} }, kid => 'b' }));
ok(hup_and_wait(qr/JWT keys and role names reloaded/), 'a new admin role name is reloaded');
is(st(tok($bk, 'b', 'boss')), 403, 'the old name is no role now');
is(st(tok($bk, 'b', 'chief')), 200, 'the new name is admin');

is($poll->result(15), 204, 'the long-poll parked across the reloads ends normally (204)');
is($b->stop, 0, 'the broker stops cleanly');

done_testing;
