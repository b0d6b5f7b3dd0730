package QueenTest;

# The integration-test harness: a throwaway PostgreSQL 15 cluster per test file and one or
# more queend brokers on it, spoken to over real HTTP. Everything a test starts lives under
# one short temp dir in /tmp and is stopped and removed by the END block below, even when the
# test dies. Core Perl modules only.
#
#   my $pg = start_pg();                 # skips the file when PostgreSQL 15 is not installed
#   my $q  = start_queend(QUEEN_MAX_BODY_BYTES => 1024);
#   my ($status, $json, $headers, $raw) = $q->get('/health');
#
# Environment: QUEEND (broker binary), top_builddir, PG_BINDIR, QUEEND_WRAPPER (a command
# prepended to the broker, e.g. "valgrind -q --error-exitcode=99"), QUEEN_TEST_START_TIMEOUT
# (seconds to wait for /health, default 30), QUEEN_TEST_KEEP=1 (keep the temp dir).

use strict;
use warnings;
use Exporter 'import';
use File::Path qw(rmtree);
use File::Temp ();
use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP ();
use POSIX qw(WNOHANG);
use Test::More ();
use Time::HiRes qw(time sleep);

our @EXPORT = qw(start_pg start_standby start_queend queend_bin run_queend free_port wait_until
	bg jtrue jfalse to_json from_json iso_ms iso_epoch uuid_re iso_re
	is_true is_false is_null txns offsets queue_list find_queue index_conds);

my $JSON = JSON::PP->new->utf8->canonical->allow_nonref;
my $OWNER = $$;
my ($TMP, @PGS, @BROKERS);

sub jtrue  { JSON::PP::true }
sub jfalse { JSON::PP::false }
sub to_json { $JSON->encode($_[0]) }
sub from_json { my $v = eval { $JSON->decode($_[0]) }; $v }

# UUIDv7 (message and lease ids) and ISO-8601 UTC with milliseconds (SPEC 2).
sub uuid_re { qr/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/ }
sub iso_re  { qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ }

# JSON booleans, not 1/0 or strings, and null as a present key with no value.
sub is_true  { my ($v, $name) = @_; Test::More::ok(JSON::PP::is_bool($v) && $v, $name) }
sub is_false { my ($v, $name) = @_; Test::More::ok(JSON::PP::is_bool($v) && !$v, $name) }
sub is_null  { my ($h, $k, $name) = @_;
	Test::More::ok(ref $h eq 'HASH' && exists $h->{$k} && !defined $h->{$k}, $name // "$k is null") }

# The transactionIds and offsets of a pop answer's messages, in answer order.
sub txns    { [ map { $_->{transactionId} } @{ ($_[0] // {})->{messages} // [] } ] }
sub offsets { [ map { $_->{offset} } @{ ($_[0] // {})->{messages} // [] } ] }

# GET /api/v1/resources/queues as a list (the answer may be the array or {"queues":[...]}; undef
# when the broker does not answer 200 with a list),
# and the entry named $name in it.
sub queue_list {
	my $b = shift;
	my ($s, $j) = $b->get('/api/v1/resources/queues');
	return undef unless $s == 200;
	return ref $j eq 'ARRAY' ? $j : ref $j eq 'HASH' && ref $j->{queues} eq 'ARRAY' ? $j->{queues} : undef;
}
sub find_queue {
	my ($b, $name) = @_;
	my ($e) = grep { ($_->{name} // $_->{queue} // '') eq $name } @{ queue_list($b) // [] };
	return $e;
}

sub iso_epoch {
	my $s = shift // return undef;
	my @f = $s =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?Z$/ or return undef;
	require Time::Local;
	return Time::Local::timegm($f[5], $f[4], $f[3], $f[2], $f[1] - 1, $f[0]) + ($f[6] // 0);
}

sub iso_ms {
	my $t = shift // time;
	my @g = gmtime(int $t);
	return sprintf('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', $g[5] + 1900, $g[4] + 1, @g[3, 2, 1, 0],
		int(($t - int $t) * 1000));
}

sub tmpdir {
	return $TMP if $TMP;
	$TMP = File::Temp::tempdir('qtXXXXXX', DIR => '/tmp', CLEANUP => 0);
	chmod 0755, $TMP;
	if ($> == 0) {
		my ($uid, $gid) = (getpwnam('postgres'))[2, 3];
		die "running as root but there is no postgres user\n" unless defined $uid;
		chown $uid, $gid, $TMP;
	}
	_watchdog();
	return $TMP;
}

# The END block cleans up; this covers the case where it cannot run (the test process was
# SIGKILLed, e.g. by a timeout): a detached process that waits for the test to vanish, then
# kills the brokers listed in $TMP/pids, stops the cluster and removes the dir. END ends it.
my $WATCHDOG;

sub _watchdog {
	my ($owner, $dir) = ($$, $TMP);
	my $bindir = $ENV{PG_BINDIR} || '/usr/lib/postgresql/15/bin';
	my $pid = fork // return;
	if ($pid) {
		$WATCHDOG = $pid;
		return;
	}
	POSIX::setsid();
	open STDIN, '<', '/dev/null';
	open STDOUT, '>', '/dev/null';	# prove reads the TAP pipe until every writer is gone
	open STDERR, '>', '/dev/null';
	POSIX::close($_) for 3 .. 63;	# Test::Builder's copies of the TAP pipe, among others
	$SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
	sleep 1 while kill 0, $owner;
	if (open my $fh, '<', "$dir/pids") {
		for my $p (map { /^(\d+) (.*)$/ ? [ $1, $2 ] : () } <$fh>) {
			my $cmd = _slurp("/proc/$p->[0]/cmdline");
			kill 'KILL', $p->[0] if index($cmd, $p->[1]) >= 0;
		}
	}
	for my $data (grep { -e "$_/postmaster.pid" } glob("$dir/pgdata*")) {
		my @cmd = ("$bindir/pg_ctl", '-D', $data, '-m', 'immediate', 'stop');
		unshift @cmd, 'runuser', '-u', 'postgres', '--' if $> == 0;
		system(@cmd);
	}
	rmtree($dir) unless $ENV{QUEEN_TEST_KEEP};
	POSIX::_exit(0);
}

sub free_port {
	my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
		Listen => 1, ReuseAddr => 1) or die "cannot find a free port: $!\n";
	my $port = $s->sockport;
	close $s;
	return $port;
}

# Polls $cond every $step seconds until it returns true or $timeout seconds pass; returns its
# last value. The one way tests wait for something.
sub wait_until {
	my ($cond, $timeout, $step) = @_;
	my $deadline = time + ($timeout // 10);
	while (1) {
		my $v = $cond->();
		return $v if $v || time >= $deadline;
		sleep($step // 0.05);
	}
}

# Runs $code in a child process; ->result returns what it returned (a JSON-able value), or
# {error => ...} when it died or did not finish within the timeout. For requests that block
# (long-polls) and for concurrent consumers.
sub bg {
	my $code = shift;
	pipe(my $r, my $w) or die "pipe: $!";
	my $pid = fork // die "fork: $!";
	if (!$pid) {
		close $r;
		my $out = eval { { ok => $code->() } } // { error => "$@" };
		print {$w} $JSON->encode($out);
		close $w;
		POSIX::_exit(0);
	}
	close $w;
	return bless { pid => $pid, fh => $r }, 'QueenTest::Bg';
}

sub queend_bin {
	return $ENV{QUEEND} if $ENV{QUEEND};
	return "$ENV{top_builddir}/src/queend" if $ENV{top_builddir};
	return '/work/build/src/queend';
}

sub wrapper { return $ENV{QUEEND_WRAPPER} ? split(' ', $ENV{QUEEND_WRAPPER}) : () }

# Runs the broker binary to completion (for --help, --version, --check-config, bad config)
# with the harness environment plus %env; returns (exit status, combined output).
sub run_queend {
	my ($args, %env) = @_;
	my $out = tmpdir() . '/run-' . free_port() . '.out';
	my $pid = fork // die "fork: $!";
	if (!$pid) {
		_broker_env(PORT => free_port(), %env);
		open STDIN, '<', '/dev/null';
		open STDOUT, '>', $out;
		open STDERR, '>&', \*STDOUT;
		exec(wrapper(), queend_bin(), @$args) or POSIX::_exit(127);
	}
	my $ok = wait_until(sub { waitpid($pid, WNOHANG) == $pid }, 30);
	my $status = $ok ? ($? & 127 ? 128 + ($? & 127) : $? >> 8) : do {
		kill 'KILL', $pid; waitpid($pid, 0); 'timeout';
	};
	return ($status, _slurp($out));
}

sub _slurp {
	open my $fh, '<', $_[0] or return '';
	local $/;
	return scalar <$fh>;
}

sub _broker_env {
	my %env = @_;
	delete $ENV{$_} for grep { /^(QUEEN_|JWT_|PG_|DB_|DEFAULT_|RETENTION_|NUM_WORKERS)/ } keys %ENV;
	my $pg = $PGS[-1];
	my %base = (HOST => '127.0.0.1', PG_HOST => '127.0.0.1', PG_PORT => $pg ? $pg->{port} : 5432,
		PG_USER => 'postgres', PG_PASSWORD => 'x', PG_DB => 'postgres', LOG_LEVEL => 'warn',
		FILE_BUFFER_DIR => tmpdir() . '/spool');
	%base = (%base, %env);
	$ENV{$_} = $base{$_} for keys %base;
}

# ---- PostgreSQL ---------------------------------------------------------------------------

sub start_pg {
	my $bindir = $ENV{PG_BINDIR} || '/usr/lib/postgresql/15/bin';
	Test::More::plan(skip_all => 'PostgreSQL 15 server binaries not found')
		unless -x "$bindir/initdb" && -x "$bindir/pg_ctl";
	my $dir = tmpdir();
	my $pg = bless { bindir => $bindir, dir => $dir, data => "$dir/pgdata" }, 'QueenTest::Pg';
	$pg->_run('initdb', '-D', $pg->{data}, '-U', 'postgres', '-A', 'trust', '-N', '-E', 'UTF8',
		'--locale=C') == 0 or die "initdb failed:\n" . _slurp("$dir/pg-cmd.log");
	open my $fh, '>>', "$pg->{data}/postgresql.conf" or die "postgresql.conf: $!";
	print {$fh} "fsync = off\nfull_page_writes = off\n",
		"listen_addresses = '127.0.0.1'\nunix_socket_directories = '$dir'\n",
		"max_connections = 200\nshared_buffers = 32MB\n";
	close $fh;
	push @PGS, $pg;
	for my $try (1 .. 5) {
		$pg->{port} = free_port();
		return $pg if $pg->start;
	}
	die "pg_ctl start failed:\n" . _slurp("$dir/pg.log");
}

# A streaming standby of $primary made with pg_basebackup, as a second host: it listens on
# 127.0.0.2 with the primary's port number (so one PG_PORT serves both hosts) and replicates
# synchronously (the primary waits for it at every commit) unless async => 1. Skips the file
# when pg_basebackup is missing or 127.0.0.2 cannot be bound.
sub start_standby {
	my ($primary, %o) = @_;
	my $dir = tmpdir();
	Test::More::plan(skip_all => 'pg_basebackup not found')
		unless -x "$primary->{bindir}/pg_basebackup";
	my $probe = IO::Socket::INET->new(LocalAddr => '127.0.0.2', LocalPort => $primary->{port},
		Proto => 'tcp', Listen => 1, ReuseAddr => 1);
	Test::More::plan(skip_all => "cannot listen on 127.0.0.2:$primary->{port}: $!") unless $probe;
	close $probe;
	my $sb = bless { bindir => $primary->{bindir}, dir => $dir, data => "$dir/pgdata-standby",
		port => $primary->{port}, host => '127.0.0.2', log => "$dir/pg-standby.log" },
		'QueenTest::Pg';
	my $sock = "$dir/standby-sock";
	mkdir $sock or die "mkdir $sock: $!";
	chown((getpwnam('postgres'))[2, 3], $sock) if $> == 0;
	$sb->_run('pg_basebackup', '-h', '127.0.0.1', '-p', $primary->{port}, '-U', 'postgres',
		'-D', $sb->{data}, '-X', 'stream', '-R') == 0
		or die "pg_basebackup failed:\n" . _slurp("$dir/pg-cmd.log");
	open my $fh, '>>', "$sb->{data}/postgresql.conf" or die "postgresql.conf: $!";
	# The WAL receiver names itself after cluster_name (pg_basebackup -R writes the rest of
	# primary_conninfo).
	print {$fh} "listen_addresses = '127.0.0.2'\nunix_socket_directories = '$sock'\n",
		"cluster_name = 'standby1'\nhot_standby = on\n";
	close $fh;
	push @PGS, $sb;
	$sb->start or die "standby start failed:\n" . _slurp($sb->{log});
	if (!$o{async}) {
		$primary->psql("ALTER SYSTEM SET synchronous_standby_names = 'standby1'");
		$primary->psql('SELECT pg_reload_conf()');
		wait_until(sub { $primary->psql("SELECT sync_state FROM pg_stat_replication " .
			"WHERE application_name = 'standby1'") eq 'sync' }, 30, 0.1)
			or die "the standby did not become synchronous\n";
	}
	return $sb;
}

package QueenTest::Pg;

use Time::HiRes qw(time sleep);

sub port { $_[0]{port} }

sub _run {
	my ($self, $prog, @args) = @_;
	my @cmd = ("$self->{bindir}/$prog", @args);
	unshift @cmd, 'runuser', '-u', 'postgres', '--' if $> == 0;
	my $pid = fork // die "fork: $!";
	if (!$pid) {
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', "$self->{dir}/pg-cmd.log";
		open STDERR, '>&', \*STDOUT;
		exec(@cmd) or POSIX::_exit(127);
	}
	waitpid($pid, 0);
	return $?;
}

# Starts (or restarts) the cluster on its port; true when it accepts connections.
sub start {
	my $self = shift;
	my $ok = $self->_run('pg_ctl', '-w', '-t', '60', '-D', $self->{data}, '-l',
		$self->{log} // "$self->{dir}/pg.log", '-o', "-p $self->{port}", 'start') == 0;
	$self->{running} = $ok;
	return $ok;
}

sub stop {
	my ($self, $mode) = @_;
	return 1 unless $self->{running};
	$self->{running} = 0;
	return $self->_run('pg_ctl', '-w', '-D', $self->{data}, '-m', $mode // 'immediate', 'stop') == 0;
}

# Promotes a standby to primary (pg_ctl promote, waiting until it accepts writes).
sub promote {
	my $self = shift;
	return $self->_run('pg_ctl', '-w', '-t', '60', '-D', $self->{data}, 'promote') == 0;
}

# Runs SQL through psql and returns its unaligned output (for the rare check the API cannot do).
sub psql {
	my ($self, $sql) = @_;
	open my $fh, '-|', "$self->{bindir}/psql", '-X', '-A', '-t', '-q', '-h', $self->{host} // '127.0.0.1', '-p',
		$self->{port}, '-U', 'postgres', '-d', 'postgres', '-c', $sql or die "psql: $!";
	local $/;
	my $out = <$fh> // '';
	close $fh;
	$out =~ s/\s+\z//;
	return $out;
}

# The plans PostgreSQL chose for the statements $sql runs, nested ones included, as
# auto_explain logs them with the rows each node returned: one text per statement. Generic
# plans are forced, so a plan is the one a session caches, whatever the values of its
# parameters.
sub plans {
	my ($self, $sql) = @_;
	my $file = QueenTest::tmpdir() . '/plans.sql';
	open my $fh, '>', $file or die "$file: $!";
	print {$fh} join("\n", "LOAD 'auto_explain';", 'SET auto_explain.log_min_duration = 0;',
		'SET auto_explain.log_nested_statements = on;', 'SET auto_explain.log_level = notice;',
		'SET auto_explain.log_analyze = on;', 'SET auto_explain.log_timing = off;',
		'SET client_min_messages = notice;', 'SET plan_cache_mode = force_generic_plan;',
		"$sql;"), "\n";
	close $fh;
	open my $ph, '-|', "$self->{bindir}/psql -X -q -h " . ($self->{host} // '127.0.0.1') .
		" -p $self->{port} -U postgres -d postgres -f $file 2>&1" or die "psql: $!";
	local $/;
	my $out = <$ph> // '';
	close $ph;
	return split /NOTICE:\s+duration:/, $out;
}

package QueenTest;

# The Index Cond of every scan through index $index in a plan text (plans above): '' for a
# scan of the whole index, which has none.
sub index_conds {
	my ($plan, $index) = @_;
	my (@conds, $in);
	for my $line (split /\n/, $plan) {
		if ($line =~ /(?:Index (?:Only )?Scan using|Bitmap Index Scan on) \Q$index\E\b/) {
			push @conds, '';
			$in = 1;
		} elsif ($line =~ /->/) {
			$in = 0;
		} elsif ($in && $line =~ /^\s+Index Cond: (.*)$/) {
			$conds[-1] = $1;
			$in = 0;
		}
	}
	return @conds;
}

# ---- the broker ---------------------------------------------------------------------------

my $broker_seq = 0;

sub start_queend {
	my %env = @_;
	my $bin = queend_bin();
	die "queend binary not found or not executable: $bin (set QUEEND)\n" unless -x $bin;
	my $dir = tmpdir();
	my $n = ++$broker_seq;
	my $log = "$dir/queend-$n.log";
	my $limit = $ENV{QUEEN_TEST_START_TIMEOUT} || 30;
	for my $try (1 .. 3) {
		my $port = $env{PORT} // free_port();
		my %e = (FILE_BUFFER_DIR => "$dir/spool-$n", %env, PORT => $port);
		mkdir $e{FILE_BUFFER_DIR};
		my $pid = fork // die "fork: $!";
		if (!$pid) {
			_broker_env(%e);
			open STDIN, '<', '/dev/null';
			open STDOUT, '>>', $log;
			open STDERR, '>&', \*STDOUT;
			exec(wrapper(), $bin) or POSIX::_exit(127);
		}
		my $b = bless { port => $port, pid => $pid, url => "http://127.0.0.1:$port", log => $log,
			n => $n }, 'QueenTest::Broker';
		push @BROKERS, $b;
		if (open my $fh, '>>', "$dir/pids") { print {$fh} "$pid $bin\n"; close $fh }
		my $ready = wait_until(sub {
			return 'exited' if waitpid($pid, WNOHANG) == $pid;
			my ($s) = $b->get('/health');
			return $s == 200 ? 'ready' : 0;
		}, $limit, 0.05);
		return $b if ($ready // '') eq 'ready';
		if (($ready // '') eq 'exited') {
			$b->{exited} = 1;
			next if _slurp($log) =~ /address already in use|EADDRINUSE/i && !$env{PORT};
		} else {
			$b->kill_hard;
		}
		die "queend did not become ready (" . ($ready || "no 200 from /health in ${limit}s") .
			"):\n" . $b->log_tail;
	}
	die "queend could not bind a free port\n";
}

package QueenTest::Broker;

use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);

sub url  { $_[0]{url} }
sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }

# How many times the broker's log matches $re so far (its reloads, its reloads of keys...).
sub log_count {
	my ($self, $re) = @_;
	return scalar(() = QueenTest::_slurp($self->{log}) =~ /$re/g);
}

sub log_tail {
	my ($self, $lines) = @_;
	my @l = split /\n/, QueenTest::_slurp($self->{log});
	@l = @l[-($lines // 40) .. -1] if @l > ($lines // 40);
	return join('', map { "  | $_\n" } @l) || "  (log $self->{log} is empty)\n";
}

# SIGTERM, wait (up to $timeout s, default 30), and return the exit status (128+signal when
# killed by one, 'timeout' when it had to be SIGKILLed).
sub stop {
	my ($self, $timeout) = @_;
	return $self->{status} if $self->{exited};
	kill 'TERM', $self->{pid};
	my $done = QueenTest::wait_until(sub { waitpid($self->{pid}, WNOHANG) == $self->{pid} },
		$timeout // 30);
	$self->{exited} = 1;
	if (!$done) {
		kill 'KILL', $self->{pid};
		waitpid($self->{pid}, 0);
		return $self->{status} = 'timeout';
	}
	return $self->{status} = $? & 127 ? 128 + ($? & 127) : $? >> 8;
}

sub kill_hard {
	my $self = shift;
	return if $self->{exited};
	kill 'KILL', $self->{pid};
	waitpid($self->{pid}, 0);
	$self->{exited} = 1;
}

sub _ua {
	my $self = shift;
	# A forked child must not share the parent's keep-alive connection.
	delete $self->{ua} if ($self->{ua_pid} // 0) != $$;
	$self->{ua_pid} = $$;
	return $self->{ua} //= HTTP::Tiny->new(timeout => 60, keep_alive => 1, agent => 'queen-test/1');
}

sub _qs {
	my $q = shift or return '';
	my $esc = sub { my $s = shift; $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge; $s };
	return '?' . join('&', map { $esc->($_) . '=' . $esc->($q->{$_}) } sort keys %$q);
}

# The one request primitive: returns (status, decoded JSON or undef, headers, raw body).
# $body is sent as is (a string) so that tests can send malformed JSON.
sub request {
	my ($self, $method, $path, $body, $headers) = @_;
	my %opt = (headers => { %{ $headers // {} } });
	if (defined $body) {
		$opt{content} = $body;
		$opt{headers}{'content-type'} //= 'application/json';
	}
	my $r = $self->_ua->request($method, $self->{url} . $path, \%opt);
	my $raw = $r->{content} // '';
	return ($r->{status}, length $raw ? QueenTest::from_json($raw) : undef, $r->{headers}, $raw);
}

sub get      { my ($s, $p, $q) = @_; $s->request('GET', $p . _qs($q)) }
sub del      { my ($s, $p, $q) = @_; $s->request('DELETE', $p . _qs($q)) }
sub post_json { my ($s, $p, $d) = @_; $s->request('POST', $p, QueenTest::to_json($d)) }
sub put_json { my ($s, $p, $d) = @_; $s->request('PUT', $p, QueenTest::to_json($d)) }

# Bytes straight onto a socket, for what HTTP::Tiny will not send (a Content-Length it does
# not keep). Returns (status, decoded JSON or undef, headers, raw body, seconds it took).
sub raw {
	my ($self, $bytes, $timeout) = @_;
	my $t0 = time;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port},
		Proto => 'tcp') or die "connect: $!";
	local $SIG{PIPE} = 'IGNORE';
	syswrite($s, $bytes);
	my $buf = '';
	my $deadline = time + ($timeout // 10);
	while (time < $deadline) {
		my $rin = '';
		vec($rin, fileno($s), 1) = 1;
		last unless select(my $rout = $rin, undef, undef, 0.1) >= 0;
		next unless vec($rout, fileno($s), 1);
		my $n = sysread($s, $buf, 65536, length $buf);
		last unless $n;
		if ($buf =~ /\r\n\r\n/ && $buf =~ /^content-length:\s*(\d+)/mi) {
			last if length($buf) >= index($buf, "\r\n\r\n") + 4 + $1;
		}
	}
	close $s;
	my ($head, $body) = split /\r\n\r\n/, $buf, 2;
	my ($status) = ($head // '') =~ m{^HTTP/1\.\d (\d{3})};
	my %h = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } split /\r\n/, $head // '';
	return ($status // 0, length($body // '') ? QueenTest::from_json($body) : undef, \%h,
		$body // '', time - $t0);
}

# ---- protocol helpers ----

# POST /api/v1/push with the given items; returns (status, body).
sub push_items {
	my ($self, @items) = @_;
	return $self->post_json('/api/v1/push', { items => \@items });
}

# Pushes $n messages to $queue in one request: transactionIds "$prefix-0" .. and payloads
# {"i":0} ..; dies unless every item is queued. Returns the push answer (array).
sub push_n {
	my ($self, $queue, $n, %o) = @_;
	my $prefix = $o{prefix} // "$queue-m";
	my @items = map { +{ queue => $queue, partition => $o{partition} // 'Default',
		transactionId => "$prefix-$_", payload => { i => $_ } } } 0 .. $n - 1;
	my ($s, $b) = $self->push_items(@items);
	die "push_n($queue, $n): status $s: " . QueenTest::to_json($b) . "\n"
		unless $s == 201 && ref $b eq 'ARRAY' && !grep { $_->{status} ne 'queued' } @$b;
	return $b;
}

# GET a pop route: $queue plus optional partition => ..., everything else goes to the query
# string. Returns (status, body, headers).
sub pop {
	my ($self, $queue, %p) = @_;
	my $part = delete $p{partition};
	my $path = '/api/v1/pop/queue/' . _seg($queue) . (defined $part ? '/partition/' . _seg($part) : '');
	return $self->get($path, %p ? \%p : undef);
}

# The ids of $queue's partitions by name, from its detail (GET /api/v1/resources/queues/:q);
# empty when the broker does not know the queue.
sub partition_ids {
	my ($self, $queue) = @_;
	my ($s, $d) = $self->get('/api/v1/resources/queues/' . _seg($queue));
	return {} unless $s == 200 && ref $d eq 'HASH';
	return { map { $_->{name} => $_->{id} } @{ $d->{partitions} // [] } };
}

sub _seg { my $s = shift; $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge; $s }

# POST /api/v1/ack/batch with the given acknowledgments (and consumerGroup when given).
sub ack_batch {
	my ($self, $group, @acks) = @_;
	return $self->post_json('/api/v1/ack/batch',
		{ (defined $group ? (consumerGroup => $group) : ()), acknowledgments => \@acks });
}

# POST /api/v1/configure {"queue":..., "options":{...}}; returns (status, body).
sub configure {
	my ($self, $queue, %opt) = @_;
	return $self->post_json('/api/v1/configure', { queue => $queue, options => \%opt });
}

# POST /api/v1/transaction; asserts the 200 every transaction answer has (a refusal is a 200
# with success:false) and returns the decoded body, {} when there is none.
sub transaction {
	my ($self, $body, $name) = @_;
	my ($s, $b, undef, $raw) = $self->post_json('/api/v1/transaction', $body);
	Test::More::is($s, 200, ($name // 'transaction') . ': 200') or Test::More::diag($raw);
	return ref $b eq 'HASH' ? $b : {};
}

# Acks every message of a pop answer with $status (default completed) under its lease.
sub ack_all {
	my ($self, $popped, $status) = @_;
	my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
		leaseId => $_->{leaseId}, status => $status // 'completed' } } @{ $popped->{messages} };
	return $self->ack_batch($popped->{consumerGroup}, @acks);
}

package QueenTest::Bg;

use POSIX qw(WNOHANG);
use Time::HiRes qw(time);

sub pid { $_[0]{pid} }

# Whether the child has finished (its result is waiting to be read), without waiting.
sub done {
	my ($self) = @_;
	return 1 if $self->{result};
	my $rin = '';
	vec($rin, fileno($self->{fh}), 1) = 1;
	return select(my $rout = $rin, undef, undef, 0) > 0;
}

# Waits up to $timeout seconds (default 60) for the child; returns its value or {error}.
sub result {
	my ($self, $timeout) = @_;
	return $self->{result} if $self->{result};
	my ($buf, $fh) = ('', $self->{fh});
	my $deadline = time + ($timeout // 60);
	while (time < $deadline) {
		my $rin = '';
		vec($rin, fileno($fh), 1) = 1;
		next unless select(my $rout = $rin, undef, undef, 0.1) > 0;
		my $n = sysread($fh, $buf, 65536, length $buf);
		last unless $n;
	}
	close $fh;
	# The child closes its end just before it exits: give it a moment to be reaped.
	my $reaped = QueenTest::wait_until(sub { waitpid($self->{pid}, WNOHANG) == $self->{pid} },
		$deadline - time > 1 ? 2 : 0.5, 0.01);
	if (!$reaped) {
		kill 'KILL', $self->{pid};
		waitpid($self->{pid}, 0);
		return $self->{result} = { error => 'child did not finish in time' };
	}
	my $v = QueenTest::from_json($buf) // { error => "child sent no result: $buf" };
	return $self->{result} = exists $v->{ok} ? $v->{ok} : $v;
}

package QueenTest;

# Clean up whatever this file started, even when it died; show the brokers' logs when a test
# failed. Runs only in the process that loaded the harness, never in forked children.
$SIG{$_} = sub { exit 130 } for qw(INT TERM HUP);

END {
	my $status = $?;
	if ($$ == $OWNER) {
		if (@BROKERS && ($status || !Test::More->builder->is_passing)) {
			Test::More::diag("queend log $_->{log}:\n" . $_->log_tail) for @BROKERS;
		}
		# A broker still running must stop cleanly on SIGTERM; under QUEEND_WRAPPER this
		# is also where valgrind's --error-exitcode surfaces.
		for my $b (grep { !$_->{exited} } @BROKERS) {
			my $st = $b->stop($ENV{QUEEND_WRAPPER} ? 60 : 10);
			next if $st eq '0';
			Test::More::diag("queend (pid $b->{pid}) exited with status $st at the end:\n" .
				$b->log_tail);
			$status ||= 1;
		}
		$_->stop('immediate') for @PGS;
		rmtree($TMP) if $TMP && !$ENV{QUEEN_TEST_KEEP};
		if ($WATCHDOG) {
			kill 'TERM', $WATCHDOG;
			waitpid($WATCHDOG, 0);
		}
	}
	$? = $status;
}

1;
