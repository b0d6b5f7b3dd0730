#!/usr/bin/perl
# The settings table and its documentation stay in step (STYLE "Config precedence"): every
# setting the binary prints with --print-config is documented in queend.conf(5) with the type,
# range, default and reload-or-restart the binary has, in queend(8) (its flag and its
# environment variable, with the default) and in contrib/queend.conf.example (commented out,
# with its default); queend.conf(5) and the example name no setting the binary does not know;
# the example, uncommented, is a valid configuration that changes nothing. The binary is the
# truth: types and ranges are read back from its own error messages.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use Test::More;

my $srcdir = $ENV{top_srcdir} || abs_path(dirname(abs_path(__FILE__)) . '/..');
my $queend = $ENV{QUEEND};
if (!$queend) {
	my $built = $ENV{top_builddir} ? "$ENV{top_builddir}/src/queend" : '';
	$queend = $built && -x $built ? $built : '/work/build/src/queend';
}
plan skip_all => "no queend binary at $queend (build it, or set QUEEND)" unless -x $queend;

my %page = (
	conf5 => "$srcdir/man/queend.conf.5",
	man8 => "$srcdir/man/queend.8",
	api7 => "$srcdir/man/queen-api.7",
	example => "$srcdir/contrib/queend.conf.example",
);
for (sort keys %page) {
	plan skip_all => "$page{$_} is missing (top_srcdir=$srcdir)" unless -r $page{$_};
}

sub slurp {
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	local $/;
	return scalar <$fh>;
}

# Runs the broker with a clean environment (only what the loader and sanitizers need), so
# that what it prints are its defaults. Returns (exit status, stdout and stderr together).
sub run_queend {
	my (@args) = @_;
	my %keep = map { $_ => $ENV{$_} } grep { defined $ENV{$_} }
	    qw(PATH LD_LIBRARY_PATH ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS);
	$keep{PATH} //= '/usr/bin:/bin';
	my $pid = open(my $fh, '-|');
	die "fork: $!" unless defined $pid;
	if (!$pid) {
		open STDERR, '>&', \*STDOUT or die "dup: $!";
		%ENV = %keep;
		exec { $queend } $queend, @args or die "exec $queend: $!";
	}
	local $/;
	my $out = <$fh> // '';
	close $fh;
	return ($? >> 8, $out);
}

# Roff to plain text, enough for these pages: font macros and escapes removed, one line per
# input line; requests other than font macros give an empty line.
sub roff_args {
	my ($s) = @_;
	my @a;
	while ($s =~ /\G\s*(?:"((?:[^"]|"")*)"|(\S+))/gc) {
		push @a, defined $1 ? $1 =~ s/""/"/gr : $2;
	}
	return @a;
}

sub roff_text {
	my ($src) = @_;
	my @out;
	for my $line (split /\n/, $src) {
		next if $line =~ /^\.\\"/;
		if ($line =~ /^\.(B|I)\s+(.*)$/) {
			$line = join ' ', roff_args($2);
		} elsif ($line =~ /^\.(BR|RB|BI|IB|IR|RI)\s+(.*)$/) {
			$line = join '', roff_args($2);
		} elsif ($line =~ /^[.']/) {
			$line = '';
		}
		$line =~ s/\\f(?:[BIRP]|\[[A-Z]*\])//g;
		$line =~ s/\\[%&c]//g;
		$line =~ s/\\-/-/g;
		$line =~ s/\\\(aq/'/g;
		$line =~ s/\\\((?:dq|lq|rq)/"/g;
		$line =~ s/\\ / /g;
		$line =~ s/\\e/\\/g;
		push @out, $line;
	}
	return join "\n", @out;
}

# The entries of a ".TP" list between ".SH $section" and the next ".SH": tag -> text.
# An entry's tag is the first word of the line after ".TP".
sub tp_entries {
	my ($src, $section) = @_;
	my ($body) = $src =~ /^\.SH "?\Q$section\E"?\n(.*?)(?=^\.SH |\z)/ms
	    or return;
	my (%e, @order);
	for my $chunk (split /^\.TP\n/m, $body) {
		my ($tagline, $rest) = split /\n/, $chunk, 2;
		next unless defined $rest;
		my $text = roff_text("$tagline\n$rest");
		my ($tag) = roff_text($tagline) =~ /^\s*(\S+)/ or next;
		$text =~ s/\s+/ /g;
		push @order, $tag unless exists $e{$tag};
		$e{$tag} = $text;
	}
	return (\%e, \@order);
}

# What the binary knows.
my ($st, $out) = run_queend('--print-config');
is($st, 0, '--print-config exits 0') or diag($out);
my (@keys, %printed);
for (split /\n/, $out) {
	next unless /^([A-Z][A-Z0-9_]*) = (.*)$/;
	push @keys, $1;
	$printed{$1} = $2;
}
cmp_ok(scalar @keys, '>=', 10, scalar(@keys) . ' settings printed') or BAIL_OUT('no settings');

($st, $out) = run_queend('--help');
is($st, 0, '--help exits 0');
my %help;
my $entry = qr/^ +--([a-z0-9-]+)=VALUE, ([A-Z][A-Z0-9_]*)(?: or ([A-Z][A-Z0-9_]*))?\n/m;
my $line2 = qr/ +(.*) \(default: ([^()]*)\)( \[reload\])? *$/m;
while ($out =~ /$entry$line2/g) {
	$help{$2} = { flag => $1, alias => $3, help => $4, def => $5, reload => $6 ? 1 : 0 };
}
is_deeply([ sort keys %help ], [ sort @keys ], '--help and --print-config list the same settings');

my %info;
for my $k (@keys) {
	my $h = $help{$k} or next;
	my $i = { %$h, secret => $h->{def} eq 'unset' };
	$i->{def} = '' if $h->{def} eq 'empty';
	my (undef, $msg) = run_queend('--check-config', "--$h->{flag}=-9223372036854775808");
	if ($msg =~ /out of range \[(-?\d+), (-?\d+)\]/) {
		@$i{qw(type min max)} = ('integer', $1, $2);
	} elsif ($msg =~ /is not one of (\S+)/) {
		@$i{qw(type choices)} = ('enum', [ split /\|/, $1 ]);
	} elsif ($msg =~ /is not a boolean/) {
		$i->{type} = 'boolean';
	} else {
		$i->{type} = 'string';
	}
	$info{$k} = $i;
}

# queend.conf(5)
my $conf5 = slurp($page{conf5});
my ($entries, $order) = tp_entries($conf5, 'SETTINGS');
ok($entries && %$entries, 'queend.conf(5) has a SETTINGS list') or BAIL_OUT('no SETTINGS');
for my $tag (@$order) {
	ok(exists $info{$tag}, "queend.conf(5) documents $tag, a setting the binary knows");
}
my %type_word = (integer => qr/\binteger\b/i, boolean => qr/\bboolean\b/i,
	enum => qr/\bone of\b/i, string => qr/\bstring\b/i);
for my $k (@keys) {
	my $i = $info{$k};
	subtest "queend.conf(5): $k" => sub {
		my $text = $entries->{$k};
		ok(defined $text, 'has an entry') or return;
		my ($summary, $when) = $text =~ /^(.*?)\b(reload|restart)\./
		    or return fail("the entry says reload. or restart.: $text");
		is($when, $i->{reload} ? 'reload' : 'restart', "marked $when");
		like($summary, $type_word{ $i->{type} }, "type $i->{type}");
		if ($i->{type} eq 'integer') {
			like($summary, qr/\b\Q$i->{min}\E to \Q$i->{max}\E\b/,
			    "range $i->{min} to $i->{max}");
		}
		if ($i->{type} eq 'enum') {
			like($summary, qr/(?<![\w-])\Q$_\E(?![\w-])/, "choice $_") for @{ $i->{choices} };
		}
		if ($i->{secret}) {
			like($summary, qr/\bsecret\b/, 'says it is secret');
		} else {
			my $d = $i->{def} eq '' ? 'empty' : $i->{def};
			like($summary, qr/\bdefault \Q$d\E(?=[\s;,.(]|$)/, "default $d");
		}
	};
}
unlike($conf5, qr/^\s*\.(?:TS|EQ|PS)\b/m, 'queend.conf(5) needs no preprocessor');

# queend(8)
my $man8 = slurp($page{man8});
my ($env8) = tp_entries($man8, 'ENVIRONMENT');
my $options8 = roff_text(($man8 =~ /^\.SH OPTIONS\n(.*?)^\.SH /ms)[0] // '');
ok($env8 && %$env8, 'queend(8) has an ENVIRONMENT list');
for my $k (@keys) {
	my $i = $info{$k};
	subtest "queend(8): $k" => sub {
		like($options8, qr/(?<![\w-])--\Q$i->{flag}\E=/, "OPTIONS shows --$i->{flag}=");
		my $text = $env8->{$k};
		ok(defined $text, 'ENVIRONMENT has an entry') or return;
		if (!$i->{secret}) {
			my $d = $i->{def} eq '' ? 'empty' : $i->{def};
			like($text, qr/\bDefault \Q$d\E(?=[\s;,.(]|$)/, "with its default $d");
		}
		is($text =~ /\[reload\]/ ? 1 : 0, $i->{reload},
		    $i->{reload} ? 'marked [reload]' : 'not marked [reload]');
	};
}

# contrib/queend.conf.example
my $example = slurp($page{example});
my (%ex, @ex_order, @stray);
my @lines = split /\n/, $example;
for my $n (0 .. $#lines) {
	my $l = $lines[$n];
	if (my ($key, $value) = $l =~ /^#([A-Za-z][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/) {
		push @ex_order, $key;
		$ex{$key} = { value => $value, help => $n > 0 && $lines[ $n - 1 ] =~ /^# \S/ };
	} elsif ($l !~ /^\s*(?:#.*)?$/) {
		push @stray, $l;
	}
}
is_deeply(\@stray, [], 'the example sets nothing: every setting is commented out');
is_deeply([ sort @ex_order ], [ sort @keys ],
    'the example shows every setting, once, and no other');
for my $k (@keys) {
	my $e = $ex{$k} or next;
	ok($e->{help}, "example: $k has a line of help above it");
	next if $info{$k}{secret};
	is($e->{value}, $info{$k}{def}, "example: $k shows its default");
}
my $dir = tempdir(CLEANUP => 1);
open my $fh, '>', "$dir/all.conf" or die "$dir/all.conf: $!";
print $fh map { s/^#(?=[A-Za-z][A-Za-z0-9_]*\s*=)//r . "\n" } @lines;
close $fh;
($st, $out) = run_queend("--config=$dir/all.conf", '--check-config');
is($st, 0, 'the example, uncommented, passes --check-config') or diag($out);
my ($st2, $defaults) = run_queend('--print-config');
($st, $out) = run_queend("--config=$dir/all.conf", '--print-config');
is($out, $defaults, 'and configures exactly the defaults');

# The pages render without warnings (when groff is installed).
SKIP: {
	my ($groff) = grep { -x } map { "$_/groff" } split /:/, ($ENV{PATH} // '/usr/bin:/bin');
	skip 'groff is not installed: pages not linted', 3 unless $groff;
	for my $p (qw(man8 conf5 api7)) {
		my $warn = `"$groff" -man -ww -z "$page{$p}" 2>&1`;
		is($warn, '', "groff -man -ww: $page{$p} renders without warnings");
	}
}

done_testing;
