#!/usr/bin/perl
# Push deduplication (SPEC 4): exact, scoped to one partition, within the queue's
# dedupWindowSeconds; a repeat inside one request loses to the first; 0 turns it off.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

my ($s, $b) = $q->push_items({ queue => 'd', partition => 'p1', transactionId => 't-1', payload => 'original' });
is($s, 201, 'first push');
is($b->[0]{status}, 'queued', 'queued');
my $original = $b->[0]{message_id};

subtest 'same (queue, partition, transactionId) again: duplicate with the original id' => sub {
	my ($s, $b) = $q->push_items({ queue => 'd', partition => 'p1', transactionId => 't-1', payload => 'again' });
	is($s, 201, 'status 201');
	is($b->[0]{status}, 'duplicate', 'duplicate');
	is($b->[0]{message_id}, $original, 'message_id is the original message id');
	is($b->[0]{transaction_id}, 't-1', 'transaction_id echoed');
	is($b->[0]{queueName}, 'd', 'queueName echoed');
};

subtest 'dedup is scoped to one partition' => sub {
	my ($s, $b) = $q->push_items(
		{ queue => 'd', partition => 'p2', transactionId => 't-1', payload => 'other partition' },
		{ queue => 'd2', partition => 'p1', transactionId => 't-1', payload => 'other queue' });
	is($s, 201, 'status 201');
	is_deeply([ map { $_->{status} } @$b ], [ 'queued', 'queued' ],
		'same transactionId in another partition or queue is queued');
	isnt($b->[0]{message_id}, $original, 'with a new id');
	my (undef, $pop) = $q->pop('d', partition => 'p2');
	is_deeply([ map { $_->{data} } @{ $pop->{messages} } ], ['other partition'], 'p2 holds it');
};

subtest 'a repeat inside one request: the first wins, the rest are judged one by one' => sub {
	my ($s, $b) = $q->push_items(
		{ queue => 'd', partition => 'p1', transactionId => 't-2', payload => 'first' },
		{ queue => 'd', partition => 'p1', transactionId => 't-2', payload => 'second' },
		{ queue => 'd', partition => 'p1', transactionId => 't-3', payload => 'third' },
		{ queue => 'd', partition => 'p1', transactionId => 't-1', payload => 'old one' });
	is($s, 201, 'status 201');
	is_deeply([ map { $_->{status} } @$b ], [qw(queued duplicate queued duplicate)], 'verdicts');
	is($b->[1]{message_id}, $b->[0]{message_id}, 'the repeat answers the first one\'s id');
	is($b->[3]{message_id}, $original, 'the earlier message answers its original id');
	is_deeply([ map { $_->{index} } @$b ], [ 0 .. 3 ], 'in input order');
};

subtest 'duplicates wrote nothing' => sub {
	my ($s, $pop) = $q->pop('d', partition => 'p1', batch => 50);
	is($s, 200, 'pop p1');
	is_deeply(txns($pop), [qw(t-1 t-2 t-3)], 'three messages, each once');
	is_deeply(offsets($pop), [ 0, 1, 2 ], 'no gap in the offsets');
	is_deeply([ map { $_->{data} } @{ $pop->{messages} } ], [qw(original first third)],
		'the first payload won');
	$q->ack_all($pop);
	($s, $b) = $q->push_items({ queue => 'd', partition => 'p1', transactionId => 't-2' });
	is($b->[0]{status}, 'duplicate', 'still a duplicate after it was consumed');
};

subtest 'racing pushes of the same transactionIds: each stored once, offsets dense' => sub {
	my @kids = map {
		my $k = $_;
		bg(sub {
			my @out;
			for my $round (0 .. 4) {
				my ($s, $b) = $q->push_items(map { +{ queue => 'race', transactionId => "r-$_",
					payload => "from $k" } } reverse(0 .. 19));
				return { error => "status $s" } unless $s == 201;
				push @out, map { [ $_->{transaction_id}, $_->{status}, $_->{message_id} ] } @$b;
			}
			return \@out;
		});
	} 1 .. 4;
	my @all = map { my $r = $_->result(60); ref $r eq 'ARRAY' ? @$r : () } @kids;
	is(scalar @all, 4 * 5 * 20, 'every request answered');
	my %queued = map { $_->[0] => $_->[2] } grep { $_->[1] eq 'queued' } @all;
	is(scalar(grep { $_->[1] eq 'queued' } @all), 20, 'exactly 20 queued');
	is(scalar keys %queued, 20, 'one per transactionId');
	is_deeply([ grep { $_->[1] ne 'queued' && $_->[1] ne 'duplicate' } @all ], [], 'the rest duplicate');
	my @wrong = grep { $_->[1] eq 'duplicate' && $_->[2] ne ($queued{ $_->[0] } // '') } @all;
	is(scalar @wrong, 0, 'every duplicate answers the id of the stored message');
	my ($s, $pop) = $q->pop('race', batch => 100);
	is_deeply(offsets($pop), [ 0 .. 19 ], 'offsets 0..19, no gap');
	is_deeply([ sort @{ txns($pop) } ], [ sort map { "r-$_" } 0 .. 19 ], 'each transactionId once');
};

subtest 'dedupWindowSeconds 0 turns the probe off' => sub {
	my ($s) = $q->configure('nodedup', dedupWindowSeconds => 0);
	is($s, 200, 'configured');
	my ($s1, $b1) = $q->push_items({ queue => 'nodedup', transactionId => 'same' });
	my ($s2, $b2) = $q->push_items({ queue => 'nodedup', transactionId => 'same' },
		{ queue => 'nodedup', transactionId => 'same' });
	is_deeply([ map { $_->{status} } @$b1, @$b2 ], [qw(queued queued queued)], 'all queued');
	my %ids = map { $_->{message_id} => 1 } @$b1, @$b2;
	is(scalar keys %ids, 3, 'three messages');
	my (undef, $pop) = $q->pop('nodedup', batch => 10);
	is_deeply(txns($pop), [qw(same same same)], 'three deliveries');
};

subtest 'the window is a window: older transactionIds are not probed' => sub {
	my ($s) = $q->configure('shortdedup', dedupWindowSeconds => 1);
	is($s, 200, 'configured a 1 s window');
	my (undef, $b1) = $q->push_items({ queue => 'shortdedup', transactionId => 'w' });
	my (undef, $b2) = $q->push_items({ queue => 'shortdedup', transactionId => 'w' });
	is($b2->[0]{status}, 'duplicate', 'inside the window: duplicate');
	sleep 2.2;	# the behaviour under test is time itself
	my (undef, $b3) = $q->push_items({ queue => 'shortdedup', transactionId => 'w' });
	is($b3->[0]{status}, 'queued', 'past the window: queued again');
	isnt($b3->[0]{message_id}, $b1->[0]{message_id}, 'as a new message');
};

done_testing;
