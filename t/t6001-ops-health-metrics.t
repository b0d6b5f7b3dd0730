#!/usr/bin/perl
# Observability (SPEC 16): /health, /metrics (JSON, with the database's counts reused for a
# while) and /metrics/prometheus (text exposition, queen_ families, per queue).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

subtest '/health' => sub {
	my ($s, $b, $h) = $q->get('/health');
	is($s, 200, 'status 200');
	like($h->{'content-type'} // '', qr{^application/json}, 'JSON');
	is($b->{status}, 'healthy', 'status healthy');
	is($b->{database}, 'connected', 'database connected');
	ok(defined $b->{version} && !ref $b->{version} && length $b->{version}, "version $b->{version}");
	ok(defined $b->{uptimeSeconds} && $b->{uptimeSeconds} =~ /^\d+(\.\d+)?$/,
		"uptimeSeconds $b->{uptimeSeconds}");
	my (undef, $v) = run_queend(['--version']);
	like($v, qr/\Q$b->{version}\E/, '--version prints the same version');
};

# Some traffic for the counters.
$q->push_n('metq', 5);
my (undef, $popped) = $q->pop('metq', batch => 5);
$q->ack_all($popped);

subtest '/metrics: a JSON snapshot' => sub {
	my ($s, $b, $h) = $q->get('/metrics');
	is($s, 200, 'status 200');
	like($h->{'content-type'} // '', qr{^application/json}, 'JSON');
	is(ref $b, 'HASH', 'an object');
	my $text = to_json($b);
	like($text, qr/push/i, 'mentions pushes');
	like($text, qr/pop/i, 'mentions pops');
	like($text, qr/ack/i, 'mentions acks');
	like($text, qr/uptime/i, 'mentions uptime');
};

# The database's counts read every partition's log tail: a read serves the /metrics of the
# next second (or of 20 times as long as it took), whoever asks.
subtest '/metrics: the database counts, read at most once a second' => sub {
	my $counts = sub { my (undef, $b) = $q->get('/metrics'); ($b // {})->{database} // {} };
	my $before = $counts->();
	like($before->{messages} // '', qr/^\d+$/, "database messages: $before->{messages}");
	is($before->{queues}, 1, 'database queues: 1');
	$q->push_n('metq2', 3);
	my $again = $counts->();
	is_deeply($again, $before, 'a second /metrics at once answers the same counts');
	my $after;
	ok(wait_until(sub { $after = $counts->(); ($after->{messages} // 0) ==
		$before->{messages} + 3 }, 10), 'later ones count the 3 messages pushed since')
		or diag(to_json($after));
	is($after->{queues}, 2, 'and the new queue');
};

subtest '/metrics/prometheus: text exposition' => sub {
	my ($s, undef, $h, $text) = $q->get('/metrics/prometheus');
	is($s, 200, 'status 200');
	like($h->{'content-type'} // '', qr{^text/plain;\s*version=0\.0\.4}, 'text/plain; version=0.0.4');
	my @samples = grep { length && !/^#/ } split /\n/, $text;
	ok(@samples > 0, scalar(@samples) . ' samples');
	my @bad = grep { !/^queen_[a-zA-Z0-9_:]*(\{[^}]*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)( -?\d+)?$/ }
		@samples;
	is_deeply(\@bad, [], 'every sample is a queen_ family with a value');
	like($text, qr/^# TYPE queen_\w+ (counter|gauge|histogram|summary|untyped)$/m, 'TYPE lines');
	like($text, qr/^queen_\w+\{[^}]*queue="metq"[^}]*\} /m, 'per-queue samples for metq');
};

subtest '/health and /metrics take no body and only GET' => sub {
	my ($s) = $q->request('POST', '/metrics', '{}');
	is($s, 405, 'POST /metrics: 405');
};

done_testing;
