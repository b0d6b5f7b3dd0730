#!/usr/bin/perl
# The request fuzzer (contrib/fuzz-requests) against the broker under test: malformed request
# lines, headers and chunked bodies, mutated JSON for every POST route, odd query strings and
# path parameters. The broker stays up, answers no client's mistake with a 5xx, gives its
# memory back, and exits cleanly afterwards (under ASan+UBSan: no report, no leak).
# QUEEN_FUZZ_REQUESTS sets the count (default 2000), QUEEN_FUZZ_REQUEST_SECONDS bounds the time
# (default 60; 0: no bound); the seed is printed for a replay (QUEEN_FUZZ_SEED).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $count = $ENV{QUEEN_FUZZ_REQUESTS} || 2000;
my $seconds = $ENV{QUEEN_FUZZ_REQUEST_SECONDS} // 60;
my $seed = $ENV{QUEEN_FUZZ_SEED} || (time() ^ $$) & 0x7fffffff;
# Every class by default; QUEEN_FUZZ_EXCLUDE=class,... leaves some out.
my $exclude = $ENV{QUEEN_FUZZ_EXCLUDE} // '';

start_pg();
# Under ASan: a smaller quarantine, and free memory given back to the system, so that RSS
# shows what the broker holds.
my $asan = join(':', grep { length } $ENV{ASAN_OPTIONS} // '', 'quarantine_size_mb=16',
	'allocator_release_to_os_interval_ms=200');
my $q = start_queend(ASAN_OPTIONS => $asan, DEFAULT_TIMEOUT => 1000);
my $report = QueenTest::tmpdir() . '/fuzz-requests.report';
my $out = `'$FindBin::Bin/../contrib/fuzz-requests' --port=${\ $q->port} --pid=${\ $q->pid} --count=$count --seconds=$seconds --seed=$seed${\ ($exclude ne '' ? " --exclude='$exclude'" : '')} --report='$report' 2>&1`;
my $rc = $? >> 8;
chomp $out;
note($out);
my ($summary) = $out =~ /^(\d+ requests in .*)$/m;
ok($summary, 'the fuzzer ran to its summary') or diag($out);
like($summary // '', qr/; 0 answered 5xx to a client error;/, "no 5xx (seed $seed)");
like($summary // '', qr/; 0 whole requests unanswered;/, 'every whole request answered');
like($summary // '', qr/; broker up; /, 'the broker stayed up');
unlike($summary // '', qr/did not come back/, 'its RSS came back after the run');
is($rc, 0, 'every check of the fuzzer held')
	or diag(do { local (@ARGV, $/) = ($report); <> } // '');
my ($s) = $q->get('/health');
is($s, 200, 'healthy after the run');
is($q->stop, 0, 'the broker stops cleanly (no sanitizer report, no leak)')
	or diag($q->log_tail(60));
unlike(QueenTest::_slurp($q->{log}), qr/ERROR: AddressSanitizer|runtime error:|assertion failed/,
	'nothing in its log from a sanitizer or an assertion');

done_testing();
