#!/usr/bin/perl
# Two brokers on one database sweep the same timers table: each timer fires exactly once
# (SPEC 14, DESIGN "Scale past one machine"). The queue's dedup window is 0, so a timer fired
# twice would show up as two messages instead of being hidden as a duplicate.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $a = start_queend();
my $b = start_queend();

is(($a->configure('both', dedupWindowSeconds => 0))[0], 200, 'queue without dedup');

sub total_messages {
	my ($s, $d) = $a->get('/api/v1/resources/queues/both');
	return $s == 200 ? $d->{totals}{messages} : 0;
}

sub pending {
	my ($s, $l) = $b->get('/api/v1/timers/both', { limit => 1000 });
	return scalar @{ $l->{timers} // [] };
}

my $n = 200;
my %promised;
for my $batch (0 .. 1) {
	# Half scheduled through each broker, all due at about the same moment.
	my $via = $batch ? $b : $a;
	my @ops = map { +{ op => 'schedule', queue => 'both', timerKey => "t-$_",
		partition => 'p' . ($_ % 4), delayMs => 1500, txn => "txn-$_",
		payload => { i => $_ } } } grep { $_ % 2 == $batch } 0 .. $n - 1;
	my ($s, $r) = $via->post_json('/api/v1/timers', { operations => \@ops });
	is($s, 200, "batch $batch scheduled through broker " . ($batch ? 'B' : 'A'));
	$promised{$_->{txn}} = $_->{messageId} for @{ $r->{results} // [] };
}
is(scalar keys %promised, $n, "$n timers scheduled");

ok(wait_until(sub { pending() == 0 && total_messages() >= $n }, 60, 0.2),
	'every timer fired') or diag('pending ' . pending() . ', messages ' . total_messages());
# A double fire would come from the second sweeper, a moment after the first: look again.
my $t = time + 1;
wait_until(sub { time > $t }, 2, 0.1);
is(total_messages(), $n, "exactly $n messages in the queue");

my %seen;
wait_until(sub {
	my ($s, $d) = $b->pop('both', batch => 100, partitions => 4, autoAck => 'true');
	$seen{$_->{transactionId}}{ $_->{id} }++ for @{ $d->{messages} // [] };
	return keys %seen >= $n || $s != 200;
}, 60, 0.05);
is(scalar keys %seen, $n, 'every txn delivered');
is(scalar(grep { keys %{ $seen{$_} } != 1 || (values %{ $seen{$_} })[0] != 1 } keys %seen), 0,
	'each exactly once');
is(scalar(grep { !$seen{$_}{ $promised{$_} } } keys %promised), 0,
	'each with its promised messageId');

done_testing();
