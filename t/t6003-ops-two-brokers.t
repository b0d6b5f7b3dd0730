#!/usr/bin/perl
# Two brokers on one database (DESIGN "Scale past one machine", SPEC 5): they share every
# state through PostgreSQL, and a push to one wakes a long-poll parked on the other.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
my $A = start_queend();
my $B = start_queend();

subtest 'what one broker writes, the other serves' => sub {
	$A->push_n('shared', 3);
	my ($s, $b) = $B->pop('shared', batch => 2);
	is_deeply(txns($b), [qw(shared-m-0 shared-m-1)], 'B pops what A stored');
	($s) = $A->pop('shared');
	is($s, 204, 'A sees the lease B took');
	my (undef, $r) = $A->ack_all($b);
	is_true($r->[1]{success}, 'A acks under the lease B gave');
	($s, $b) = $A->pop('shared');
	is_deeply(txns($b), ['shared-m-2'], 'and the cursor moved for both');
	$A->ack_all($b);
	(undef, $r) = $B->push_items({ queue => 'shared', transactionId => 'shared-m-0' });
	is($r->[0]{status}, 'duplicate', 'dedup holds across brokers');
};

sub park_on_a {
	my ($queue) = @_;
	return bg(sub {
		my ($s, $j) = $A->pop($queue, wait => 'true', timeout => 10000);
		return { status => $s, body => $j, at => time };
	});
}

for my $case ([ 'an existing queue', 'shared' ], [ 'a queue that does not exist yet', 'fresh' ]) {
	my ($what, $queue) = @$case;
	subtest "a long-poll on A for $what is woken by a push to B" => sub {
		my $lp = park_on_a($queue);
		sleep 0.5;	# let it park
		my $t_push = time;
		my ($s, $b) = $B->push_items({ queue => $queue, transactionId => "via-b-$queue" });
		is($s, 201, 'pushed to B');
		my $r = $lp->result(15);
		is($r->{status}, 200, 'A answered 200');
		is_deeply(txns($r->{body}), ["via-b-$queue"], 'with the message pushed to B');
		my $lat = ($r->{at} // 1e9) - $t_push;
		ok($lat < 1.0, sprintf('woken %.0f ms after the push', $lat * 1000));
	};
}

subtest 'consumers on both brokers never share a message' => sub {
	$A->push_n('both', 20, partition => "p$_", prefix => "p$_") for 1 .. 4;
	my @kids = map {
		my $b = $_;
		bg(sub {
			my (@got, $empty);
			while (($empty // 0) < 8) {
				my ($s, $j) = $b->pop('both', batch => 3);
				if ($s != 200) { $empty++; sleep 0.05; next }
				$empty = 0;
				push @got, @{ txns($j) };
				$b->ack_all($j);
			}
			return \@got;
		});
	} ($A, $B, $A, $B);
	my %count;
	$count{$_}++ for map { @{ ref $_ eq 'ARRAY' ? $_ : [] } } map { $_->result(60) } @kids;
	is(scalar keys %count, 80, 'all 80 delivered');
	is_deeply([ grep { $count{$_} > 1 } sort keys %count ], [], 'none twice');
};

subtest "leases taken through the other broker: a pop tries other partitions, not 204" => sub {
	# B leases 1,000 of 1,100 partitions for a group; A's index has not seen them leased, so
	# its candidates are mostly leased ones. On a queue this large SQL refuses them without
	# reading every partition, and A, having learned the leases, offers others at its next
	# try, until the 100 B left are read.
	my @items = map { +{ queue => 'spread', partition => "s$_", transactionId => "s$_" } }
		1 .. 1100;
	my ($ps) = $A->push_items(@items);
	is($ps, 201, '1,100 partitions of one message');
	my %leased;
	for (1 .. 4) {
		my ($s, $b) = $B->pop('spread', consumerGroup => 'sg', subscriptionMode => 'all',
			partitions => 250, batch => 250);
		$leased{ $_->{partition} }++ for @{ $b->{messages} // [] };
	}
	is(scalar(keys %leased), 1000, 'B leases 1,000 of them, in four pops');
	my (%got, $empty);
	for (1 .. 20) {
		my ($s2, $b2) = $A->pop('spread', consumerGroup => 'sg', autopilot => 'true');
		if ($s2 == 204) {
			$empty++;
			last;
		}
		$got{ $_->{partition} }++ for @{ $b2->{messages} };
		$A->ack_all($b2);
	}
	is(scalar(keys %got), 100, 'A reads the 100 partitions B did not lease')
		or diag(scalar(keys %got) . ' read');
	is(scalar(grep { $leased{$_} } keys %got), 0, 'none that B leased');
	is($empty, 1, 'then nothing: the rest is leased');
};

# A broker tells the others what it pushed in NOTIFY payloads. One commit's partitions go in
# one payload: told row by row, the first rows of a commit could leave before the worker had
# read the others, and a pop on the other broker then found one partition of the commit and
# answered 204 for the rest.
subtest 'one commit reaches the other broker in one notification' => sub {
	my $listener = bg(sub {
		open my $fh, '-|', "$pg->{bindir}/psql", '-X', '-h', '127.0.0.1', '-p', $pg->port,
			'-U', 'postgres', '-d', 'postgres', '-c', 'LISTEN queen_push',
			'-c', 'SELECT pg_sleep(4)' or die "psql: $!";
		local $/;
		my $out = <$fh> // '';
		close $fh;
		return [ $out =~ /with payload "([^"]*)"/g ];
	});
	ok(wait_until(sub { $pg->psql("SELECT count(*) FROM pg_stat_activity " .
		"WHERE query = 'SELECT pg_sleep(4)' AND state = 'active'") > 0 }, 10),
		'a session listens');
	# 99: a request of 100 items and more is cut into shards, each a commit of its own.
	my ($s, $b) = $A->push_items(map { +{ queue => 'whole', partition => "w$_",
		payload => { i => $_ } } } 1 .. 99);
	is($s, 201, 'A stores 99 messages over 99 partitions in one commit');
	my %ids = reverse %{ $A->partition_ids('whole') };
	my $got = $listener->result(20);
	my @mine = grep { my $p = $_; grep { $ids{ (split /:/)[0] } } split /,/, $p }
		@{ ref $got eq 'ARRAY' ? $got : [] };
	is(scalar @mine, 1, 'one notification names them') or diag(explain($got));
	is(scalar(() = ($mine[0] // '') =~ /,/g) + 1, 99, 'all 99 of them');
	my ($ps, $pb) = $B->pop('whole', batch => 100, autopilot => 'true', autoAck => 'true');
	is($ps, 200, 'B serves them');
};

done_testing;
