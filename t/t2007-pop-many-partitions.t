#!/usr/bin/perl
# Pops over many partitions (SPEC 5, 6, 7): one lease id over several partitions, acked in one
# request and extended together; autopilot filling a batch from as many partitions as it
# takes; any number of consumer groups; first contact of a group with thousands of partitions
# (new / all / subscriptionFrom), where a cursor the group has not got yet is implied by its
# start and written only when a claim needs it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

my $pg = start_pg();
# pg_stat_statements counts the buffers a statement reads, nested ones included, as it ends:
# what a first contact costs, against one read of the partitions it meets.
my $pgss = -e "$pg->{bindir}/../lib/pg_stat_statements.so";
if ($pgss) {
	open my $fh, '>>', "$pg->{data}/postgresql.conf" or die "postgresql.conf: $!";
	print {$fh} "shared_preload_libraries = 'pg_stat_statements'\n";
	close $fh;
	$pg->stop('fast') && $pg->start or die "PostgreSQL restart failed\n";
	$pg->psql('CREATE EXTENSION pg_stat_statements');
}
my $q = start_queend();

# Pushes one message to each of the partitions named "$prefix-0" .. in one request.
sub push_spread {
	my ($queue, $n, $prefix, %o) = @_;
	my @items = map { +{ queue => $queue, partition => "$prefix-$_",
		transactionId => "$prefix-$_-" . ($o{tag} // 'm'), payload => { i => $_ } } } 0 .. $n - 1;
	my ($s, $b) = $q->push_items(@items);
	die "push_spread: $s\n" unless $s == 201 && !grep { $_->{status} ne 'queued' } @$b;
}

# Pops (autopilot, batch 100) and acks until 204; returns the transactionIds delivered.
sub drain {
	my ($queue, %p) = @_;
	my @got;
	for (1 .. 1000) {
		my ($s, $b) = $q->pop($queue, batch => 100, autopilot => 'true', %p);
		last if $s == 204;
		die "drain: pop status $s\n" unless $s == 200;
		push @got, @{ txns($b) };
		my ($as, $ab) = $q->ack_all($b);
		die "drain: ack failed\n" if $as != 200 || grep { !$_->{success} } @$ab;
	}
	return \@got;
}

sub cursors {
	my ($group) = @_;
	return $pg->psql("SELECT count(*) FROM queen_cursors WHERE group_name = '$group'");
}

subtest 'planner statistics follow the cursors a first contact writes' => sub {
	# First: the tables are empty, as on a new deployment.
	# The queue's partitions come first, in one push; the cursors come after, from the pops:
	# the statistics of queen_cursors must follow them, not only those of the partitions.
	push_spread('stats', 1000, 'st');
	my $rows = sub { $pg->psql("SELECT greatest(reltuples, 0)::bigint FROM pg_class " .
				   "WHERE relname = '$_[0]'") };
	# The push may commit in shards, and an ANALYZE between two of them counts only the
	# first: the rule (rows more than doubled, plus 64) then leaves it there, so the
	# statistics are right to within that: (1000 - 64) / 2 rows at least. A session that
	# goes idle within a second of its last report of row counts reports the next ones 10 s
	# later (PostgreSQL 15's PGSTAT_IDLE_INTERVAL), and the few sessions of a light load
	# are the same ones (the worker that went idle last is woken first): up to 10 s before
	# the rows are seen at all.
	ok(wait_until(sub { $rows->('queen_partitions') >= (1000 - 64) / 2 }, 25),
		'queen_partitions analysed after it grew')
		or diag('reltuples ' . $rows->('queen_partitions'));
	my $before = $rows->('queen_cursors');
	is(scalar @{ drain('stats', consumerGroup => 'st', subscriptionMode => 'all') }, 1000,
		'every message drained');
	# Analysed again once its rows doubled: an ANALYZE during the drain may have been the
	# last one, so at least half of them.
	ok(wait_until(sub { $rows->('queen_cursors') >= $before + 500 }, 25),
		'queen_cursors analysed after the group wrote its 1000 cursors')
		or diag("reltuples $before before, " . $rows->('queen_cursors') . ' after');
};

subtest 'one lease over several partitions: extended together, acked in one request' => sub {
	for my $p (qw(a b c d e)) {
		$q->push_n('multi', 3, partition => $p, prefix => $p);
	}
	my ($s, $b) = $q->pop('multi', partitions => 5, batch => 100, consumerGroup => 'w',
		subscriptionMode => 'all');
	is($s, 200, 'partitions=5 batch=100');
	is($b->{partitionsClaimed}, 5, 'five partitions claimed');
	is(scalar @{ $b->{messages} }, 15, 'all fifteen messages');
	my %lease = map { $_->{leaseId} => 1 } @{ $b->{messages} };
	is_deeply([ keys %lease ], [ $b->{leaseId} ], 'one lease id over every message');
	my %by;
	push @{ $by{ $_->{partition} } }, $_->{offset} for @{ $b->{messages} };
	is_deeply(\%by, { map { $_ => [ 0, 1, 2 ] } qw(a b c d e) }, 'each partition in order');

	my ($es, $eb) = $q->post_json("/api/v1/lease/$b->{leaseId}/extend", { seconds => 120 });
	is($es, 200, 'extend');
	is($eb->{renewed}, 5, 'the lease renewed on all five partitions');

	# Ack the first two of each partition in one request: leases kept, then the rest.
	my @msgs = @{ $b->{messages} };
	my @first = grep { $_->{offset} < 2 } @msgs;
	my ($as, $ab) = $q->ack_all({ consumerGroup => 'w', messages => \@first });
	is($as, 200, 'ack of ten messages over five partitions');
	is(scalar(grep { $_->{success} && !$_->{leaseReleased} && !$_->{noop} } @$ab), 10,
		'all ten succeed, each partition keeps its lease for the rest of its batch');
	($s) = $q->pop('multi', consumerGroup => 'w', partitions => 5);
	is($s, 204, 'the partitions are still leased');
	my @last = grep { $_->{offset} == 2 } @msgs;
	($as, $ab) = $q->ack_all({ consumerGroup => 'w', messages => \@last });
	is(scalar(grep { $_->{success} && $_->{leaseReleased} } @$ab), 5,
		'the last five: every lease released');
	($as, $ab) = $q->ack_all({ consumerGroup => 'w', messages => \@first });
	is(scalar(grep { $_->{success} && $_->{noop} } @$ab), 10, 'acked again: noop');
	($s) = $q->pop('multi', consumerGroup => 'w', partitions => 5);
	is($s, 204, 'nothing left for w');
	is($pg->psql("SELECT min(committed) || ',' || max(committed) FROM queen_cursors "
		. "WHERE group_name = 'w'"), '2,2', 'every cursor committed at 2');
};

subtest 'ack of a lease that expired, one partition of the lease acked on another lease' => sub {
	$q->push_n('exp2', 2, partition => $_, prefix => $_) for qw(x y);
	my ($s, $b) = $q->pop('exp2', partitions => 2, batch => 10, leaseSeconds => 1);
	is($b->{partitionsClaimed}, 2, 'two partitions under a one-second lease');
	sleep 1.3;
	my ($as, $ab) = $q->ack_all($b);
	is(scalar(grep { !$_->{success} && ($_->{error} // '') eq 'invalid or expired lease' } @$ab),
		4, 'every item: invalid or expired lease');
	($s, my $again) = $q->pop('exp2', partitions => 2, batch => 10);
	is(scalar @{ $again->{messages} }, 4, 'redelivered');
	is_deeply([ sort map { $_->{deliveryAttempt} } @{ $again->{messages} } ], [ 2, 2, 2, 2 ],
		'deliveryAttempt 2');
	my ($x) = grep { $_->{partition} eq 'x' } @{ $again->{messages} };
	my ($y) = grep { $_->{partition} eq 'y' } @{ $b->{messages} };
	($as, $ab) = $q->ack_batch(undef,
		{ transactionId => $x->{transactionId}, partitionId => $x->{partitionId},
		  leaseId => $x->{leaseId}, status => 'completed' },
		{ transactionId => $y->{transactionId}, partitionId => $y->{partitionId},
		  leaseId => $y->{leaseId}, status => 'completed' });
	ok($ab->[0]{success}, 'an item under the live lease commits');
	ok(!$ab->[1]{success} && $ab->[1]{error} eq 'invalid or expired lease',
		'in the same request, an item under the old lease does not');
};

subtest 'autopilot fills the batch from as many partitions as it takes' => sub {
	push_spread('wide', 200, 'w');
	push_spread('wide', 200, 'w', tag => 'n');
	my ($s, $b) = $q->pop('wide', batch => 100, autopilot => 'true', consumerGroup => 'ap',
		subscriptionMode => 'all');
	is($s, 200, 'autopilot pop over 200 partitions of 2 messages');
	is(scalar @{ $b->{messages} }, 100, 'a full batch of 100');
	is($b->{partitionsClaimed}, 50, 'from 50 partitions');
	is($b->{autopilot}{partitions}, 50, 'autopilot says 50');

	$q->push_n('deep', 150, partition => "d$_", prefix => "d$_") for 0 .. 3;
	($s, $b) = $q->pop('deep', batch => 100, autopilot => 'true', subscriptionMode => 'all');
	is(scalar @{ $b->{messages} }, 100, 'over 4 partitions of 150: a full batch');
	is($b->{partitionsClaimed}, 1, 'from one partition');
	is($b->{autopilot}{partitions}, 1, 'autopilot says 1');

	my $got = drain('wide', consumerGroup => 'ap2', subscriptionMode => 'all');
	is(scalar @$got, 400, 'another group drains all 400');
	my %seen;
	is(scalar(grep { $seen{$_}++ } @$got), 0, 'each exactly once');
};

subtest 'six consumer groups each read everything and wake on their own' => sub {
	$q->push_n('six', 4);
	my @groups = map { "grp$_" } 1 .. 6;
	for my $g (@groups) {
		my ($s, $b) = $q->pop('six', consumerGroup => $g, subscriptionMode => 'all', batch => 10);
		is_deeply(txns($b), [ map { "six-m-$_" } 0 .. 3 ], "$g got all four");
		my ($as, $ab) = $q->ack_all($b);
		is(scalar(grep { $_->{success} } @$ab), 4, "$g acked them");
	}
	for my $g (@groups) {
		my ($s) = $q->pop('six', consumerGroup => $g);
		is($s, 204, "$g: nothing left");
	}
	# The sixth group parks; a push wakes it within the long-poll's first second.
	my $bg = bg(sub {
		my $t0 = time;
		my ($s, $b) = $q->pop('six', consumerGroup => 'grp6', wait => 'true', timeout => 10000);
		return { status => $s, txns => txns($b), secs => time - $t0 };
	});
	sleep 0.5;
	$q->push_n('six', 1, prefix => 'late');
	my $r = $bg->result(15);
	is($r->{status}, 200, 'the parked pop of the sixth group is answered');
	is_deeply($r->{txns}, ['late-0'], 'with the new message');
	cmp_ok($r->{secs}, '<', 2.5, sprintf('woken by the push (%.2f s)', $r->{secs}));
	for my $g (@groups[0 .. 4]) {
		my ($s, $b) = $q->pop('six', consumerGroup => $g);
		is_deeply(txns($b), ['late-0'], "$g gets it too");
	}
};

subtest 'first contact with 3,000 partitions: new, all, subscriptionFrom' => sub {
	push_spread('many', 3000, 'p', tag => 'old');
	$pg->psql('SELECT pg_stat_statements_reset()') if $pgss;
	my ($s) = $q->pop('many', consumerGroup => 'fresh', autopilot => 'true');
	is($s, 204, 'mode new: the backlog of 3,000 partitions is skipped');
	SKIP: {
		skip 'pg_stat_statements is not installed', 1 unless $pgss;
		# The buffers the first pop read (it reads every partition, and the broker's
		# index knows them all after it), against one read of the queue's partitions and
		# their log ends.  Writing nothing, claiming nothing, it costs that read and the
		# tries of its candidates: under four such reads (it was nearly sixty, a cursor
		# insert and a claim tried over all 3,000 partitions, twice).
		my $blks = sub { $pg->psql("SELECT coalesce(sum(shared_blks_hit + shared_blks_read), 0) " .
			"FROM pg_stat_statements WHERE toplevel AND query LIKE '%$_[0]%'") };
		my $pops = $blks->('queen_pop(');
		$pg->psql("SELECT count(*) /* one read */ FROM queen_partitions p " .
			'CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset, ' .
			'p.kept_last_created_at) pl ' .
			"WHERE p.queue_id = (SELECT id FROM queen_queues WHERE name = 'many') " .
			'AND pl.next_offset > p.log_start');
		my $read = $blks->('one read');
		ok($pops > 0 && $pops < 4 * $read,
			'first contact reads the 3,000 partitions once, not once per step')
			or diag("pops read $pops buffers, one read of the partitions $read");
	}
	($s) = $q->pop('many', consumerGroup => 'fresh', autopilot => 'true') for 1 .. 5;
	is($s, 204, 'and stays skipped, pop after pop');
	is(cursors('fresh'), 0, 'no cursor row written for it');

	my $all = drain('many', consumerGroup => 'everything', subscriptionMode => 'all');
	is(scalar @$all, 3000, 'mode all: all 3,000 messages');
	my %seen;
	is(scalar(grep { $seen{$_}++ } @$all), 0, 'each exactly once');
	is(cursors('everything'), 3000, 'one cursor per partition read');

	sleep 0.2;
	my $t = iso_ms(time);
	sleep 0.2;
	$q->push_items(map { +{ queue => 'many', partition => "p-$_", transactionId => "p-$_-new" } }
		(7, 1500, 2999));
	$q->push_items({ queue => 'many', partition => 'later', transactionId => 'later-new' });
	my $got = drain('many', consumerGroup => 'fresh');
	is_deeply([ sort @$got ], [ sort qw(p-7-new p-1500-new p-2999-new later-new) ],
		'mode new: exactly what came after first contact, a new partition included');
	is(cursors('fresh'), 4, 'cursor rows only where it read');
	$got = drain('many', consumerGroup => 'since', subscriptionFrom => $t);
	is_deeply([ sort @$got ], [ sort qw(p-7-new p-1500-new p-2999-new later-new) ],
		'subscriptionFrom: the same four, nothing from before');
	$got = drain('many', consumerGroup => 'everything');
	is(scalar @$got, 4, 'the group that read everything gets the four new ones');

	my ($s2, $b2) = $q->post_json('/api/v1/consumer-groups/fresh/subscription',
		{ subscriptionTimestamp => '2000-01-01T00:00:00.000Z' });
	is($s2, 200, 'fresh moves its start back to 2000');
	$got = drain('many', consumerGroup => 'fresh');
	is(scalar @$got, 2997, 'the 2,997 partitions it had no cursor on start there now');
	is(scalar(grep { /-new$/ } @$got), 0, 'the four it read did not move');
};

subtest 'first contact claimed in the pop itself: leases, retries, autoAck, racing consumers' => sub {
	push_spread('fc', 40, 'f', tag => $_) for qw(a b c);
	my ($s, $b) = $q->pop('fc', batch => 100, autopilot => 'true', consumerGroup => 'lz',
		subscriptionMode => 'all', leaseSeconds => 1);
	is($s, 200, 'a group meets 40 partitions of 3');
	is(scalar @{ $b->{messages} }, 100, 'a full batch');
	is($b->{partitionsClaimed}, 34, 'from 34 partitions (the last one partly)');
	is(scalar(grep { $_->{deliveryAttempt} != 1 } @{ $b->{messages} }), 0, 'deliveryAttempt 1');
	my %by;
	push @{ $by{ $_->{partition} } }, $_->{offset} for @{ $b->{messages} };
	is(scalar(grep { join(',', @{ $by{$_} }) !~ /^0(,1(,2)?)?$/ } keys %by), 0,
		'each partition from offset 0, in order');
	is(cursors('lz'), 34, 'a cursor row per partition claimed');
	($s) = $q->pop('fc', consumerGroup => 'lz', partition => $b->{messages}[0]{partition});
	is($s, 204, 'a partition claimed at first contact is leased');
	sleep 1.3;
	my ($s2, $b2) = $q->pop('fc', batch => 200, consumerGroup => 'lz', partitions => 40);
	is(scalar(grep { $_->{offset} == 0 && $_->{deliveryAttempt} == 2 } @{ $b2->{messages} }),
		34, 'the lapsed first-contact leases: redelivered from 0 with deliveryAttempt 2');
	is(scalar(grep { $_->{offset} == 0 && $_->{deliveryAttempt} == 1 } @{ $b2->{messages} }),
		6, 'the six partitions not met before: deliveryAttempt 1');

	($s, $b) = $q->pop('fc', batch => 100, autopilot => 'true', consumerGroup => 'aa',
		subscriptionMode => 'all', autoAck => 'true');
	is(scalar @{ $b->{messages} }, 100, 'autoAck at first contact: 100 messages');
	($s, $b2) = $q->pop('fc', batch => 100, autopilot => 'true', consumerGroup => 'aa');
	is(scalar @{ $b2->{messages} }, 20, 'committed at once: the next pop gets the other 20');
	my %seen;
	is(scalar(grep { $seen{ $_->{transactionId} }++ } @{ $b->{messages} }, @{ $b2->{messages} }),
		0, 'none of them twice');

	# Four consumers meeting the same 300 fresh partitions at once.
	push_spread('race', 300, 'r', tag => $_) for qw(a b c);
	my @kids = map { bg(sub { drain('race', consumerGroup => 'racers',
		subscriptionMode => 'all') }) } 1 .. 4;
	my @res = map { $_->result(120) } @kids;
	is_deeply([ map { ref $_ eq 'HASH' ? $_->{error} : () } @res ], [],
		'four consumers drained');
	my @got = map { ref $_ eq 'ARRAY' ? @$_ : () } @res;
	my %count;
	$count{$_}++ for @got;
	is(scalar keys %count, 900, 'every message delivered');
	is(scalar(grep { $count{$_} > 1 } keys %count), 0, 'none twice');
	is(cursors('racers'), 300, 'one cursor row per partition');
};

subtest 'pops of one partition each come to every partition in turn' => sub {
	# Ten partitions, a pop of one partition at a time that holds no lease: the index offers
	# candidates from a rotating start, and SQL claims the first. A start that moved by a
	# step sharing a factor with the partition count came only to every other partition.
	for my $p (0 .. 9) {
		$q->push_n('turns', 3, partition => "t$p", prefix => "t$p");
	}
	my %served;
	for (1 .. 10) {
		my ($s, $b) = $q->pop('turns', batch => 1, autoAck => 'true', consumerGroup => 'tn',
			subscriptionMode => 'all');
		$served{ $b->{partition} }++ if $s == 200;
	}
	cmp_ok(scalar keys %served, '>=', 8, 'ten pops served at least eight of ten partitions')
		or diag(explain \%served);
};

subtest 'cursors that vanish under the index: the pop finds out and meets them again' => sub {
	# The index has seen the group's cursor on every partition, so the pop tries the claim
	# of cursors that exist alone; they are gone (a delete on another broker), and the pop
	# goes on to first contact rather than answering 204.
	push_spread('gone', 5, 'g', tag => 'a');
	my ($s, $b) = $q->pop('gone', batch => 5, partitions => 5, consumerGroup => 'gz',
		subscriptionMode => 'all');
	is(scalar @{ $b->{messages} }, 5, 'first pop: the message of each partition');
	my ($as) = $q->ack_all($b);
	is($as, 200, 'acked');
	is(cursors('gz'), 5, 'five cursors');
	push_spread('gone', 5, 'g', tag => 'b');
	$pg->psql("DELETE FROM queen_cursors WHERE group_name = 'gz'");
	($s, $b) = $q->pop('gone', batch => 10, partitions => 5, consumerGroup => 'gz');
	is($s, 200, 'the next pop still delivers');
	is(scalar @{ $b->{messages} }, 10, 'from the start its subscription implies: all ten');
	is(scalar(grep { $_->{deliveryAttempt} != 1 || $_->{offset} > 1 } @{ $b->{messages} }), 0,
		'offsets 0 and 1 of each partition, first deliveries');

	# A lease taken by another consumer is skipped on the claim of existing cursors too.
	($as) = $q->ack_all($b);
	push_spread('gone', 5, 'g', tag => 'c');
	my ($s1, $b1) = $q->pop('gone', batch => 1, consumerGroup => 'gz');
	my ($s2, $b2) = $q->pop('gone', batch => 1, consumerGroup => 'gz');
	is("$s1 $s2", '200 200', 'two pops of one partition each');
	isnt($b1->{partition}, $b2->{partition}, 'on two partitions: the first is leased');
};

done_testing;
