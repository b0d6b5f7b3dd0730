#!/usr/bin/perl
# The libFuzzer targets of t/fuzz, each run for a few seconds over its seed corpus (every
# seed first, the regressions found-* among them): no crash, no sanitizer report, no leak.
# They are built by `contrib/quickstart test --sanitize` (clang, --enable-fuzz) in the
# directory it passes as QUEEN_FUZZ_DIR; QUEEN_FUZZ_SECONDS sets the time per target
# (default 4). `contrib/quickstart fuzz` is the long run.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $dir = $ENV{QUEEN_FUZZ_DIR};
plan skip_all => 'fuzz targets not built: contrib/quickstart test --sanitize builds them when '
	. 'clang and libFuzzer are installed (or set QUEEN_FUZZ_DIR to a tree configured with '
	. '--enable-fuzz CC=clang after make fuzz)'
	unless $dir;

my $seconds = $ENV{QUEEN_FUZZ_SECONDS} || 4;
my @targets = map { m{/(fuzz-[a-z0-9-]+)\.c$} ? $1 : () } sort glob("$FindBin::Bin/fuzz/fuzz-*.c");
ok(@targets >= 5, scalar(@targets) . ' fuzz targets in t/fuzz');

for my $t (@targets) {
	my $bin = "$dir/t/fuzz/$t";
	my $seeds = "$FindBin::Bin/fuzz/$t";
	my $work = QueenTest::tmpdir() . "/$t";
	mkdir $work;
	mkdir "$work/corpus";
	if (!ok(-x $bin, "$t is built")) {
		diag("$bin missing: run make fuzz in $dir");
		next;
	}
	ok(-d $seeds && glob("$seeds/*"), "$t has a seed corpus in t/fuzz/$t");
	# New inputs go to a scratch corpus, never into the committed seeds.
	my $out = "$work/log";
	my $rc = system("'$bin' -max_total_time=$seconds -timeout=10 -rss_limit_mb=2048 "
		. "-print_final_stats=1 -artifact_prefix='$dir/t/fuzz/$t-' '$work/corpus' '$seeds' "
		. ">'$out' 2>&1");
	my $log = do { local (@ARGV, $/) = ($out); <> } // '';
	my ($execs) = $log =~ /stat::number_of_executed_units:\s*(\d+)/;
	my ($rate) = $log =~ /stat::average_exec_per_sec:\s*(\d+)/;
	my ($cov) = $log =~ /#\d+\s+DONE\s+cov: (\d+)/;
	ok($rc == 0 && $log !~ /ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:/,
		"$t: no crash, sanitizer report or leak in ${seconds}s")
		or diag(join("\n", grep { /ERROR|SUMMARY|runtime error|assertion|#\d+ 0x/ }
			split /\n/, $log) . "\n(crashing input: $dir/t/fuzz/$t-crash-*)");
	note(sprintf('%s: %s inputs, %s/s, coverage %s', $t, $execs // '?', $rate // '?',
		$cov // '?'));
}

done_testing();
