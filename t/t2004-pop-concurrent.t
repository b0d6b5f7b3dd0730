#!/usr/bin/perl
# Competing consumers (SPEC 1, 5): several processes popping one queue at once in one group
# never get the same message twice, and together get every message.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

my ($PARTS, $PER, $WORKERS) = (6, 40, 4);
$q->push_n('work', $PER, partition => "p$_", prefix => "p$_") for 1 .. $PARTS;

# Each worker pops and acks until the queue has looked empty several times in a row.
sub worker {
	my ($group) = @_;
	my (@got, @bad);
	my ($empty, $deadline) = (0, time + 60);
	while ($empty < 8 && time < $deadline) {
		my ($s, $b) = $q->pop('work', batch => 7,
			($group ? (consumerGroup => $group, subscriptionMode => 'all') : ()));
		if ($s == 204) {
			$empty++;
			sleep 0.05;
			next;
		}
		if ($s != 200) {
			push @bad, "pop status $s";
			last;
		}
		$empty = 0;
		push @got, map { "$_->{partition}/$_->{offset}/$_->{transactionId}" } @{ $b->{messages} };
		my ($as, $ab) = $q->ack_all($b);
		push @bad, "ack status $as" if $as != 200;
		push @bad, "ack failed: " . ($_->{error} // '?') for grep { !$_->{success} } @{ $ab // [] };
	}
	return { got => \@got, bad => \@bad };
}

sub run_workers {
	my ($group) = @_;
	my @kids = map { bg(sub { worker($group) }) } 1 .. $WORKERS;
	my @res = map { $_->result(90) } @kids;
	my @errors = map { $_->{error} // () } @res;
	is_deeply(\@errors, [], 'every worker finished');
	is_deeply([ map { @{ $_->{bad} // [] } } @res ], [], 'no pop or ack failed');
	my %count;
	$count{$_}++ for map { @{ $_->{got} // [] } } @res;
	my @twice = grep { $count{$_} > 1 } sort keys %count;
	is_deeply(\@twice, [], 'no message delivered twice');
	is(scalar keys %count, $PARTS * $PER, 'every message delivered');
	my @busy = grep { @{ $_->{got} // [] } } @res;
	note(scalar(@busy) . " of $WORKERS workers got messages");
}

subtest "$WORKERS workers, __QUEUE_MODE__" => sub { run_workers(undef) };
my ($s) = $q->pop('work');
is($s, 204, 'the queue is drained');

subtest "$WORKERS workers, a named group racing its first contact" => sub {
	# Every worker's first pop is the group's first contact; the start must be stored once.
	run_workers('crew');
};
($s) = $q->pop('work', consumerGroup => 'crew');
is($s, 204, 'the group has read everything');

done_testing;
