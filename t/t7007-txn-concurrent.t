#!/usr/bin/perl
# Concurrent transactions (SPEC 8): the broker commits waiting bundles together, yet every
# bundle keeps its own verdict. Replayed bundles mixed into a busy stream are refused alone;
# bundles racing on one transactionId produce it once; bundles acking the same lease and
# cursor from several connections all land; and nothing is written twice or lost.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub txn {
	my ($b, $body) = @_;
	my ($s, $r) = $b->post_json('/api/v1/transaction', $body);
	return $s == 200 && ref $r eq 'HASH' ? $r : { http => $s };
}

sub kv_value { my (undef, $b) = $q->get("/api/v1/kv/$_[0]/$_[1]"); return ($b // {})->{value} }

# Verdict counts of a child: ok, duplicate, and anything else (with an example).
sub tally {
	my ($t, $r) = @_;
	if ($r->{success}) { $t->{ok}++ }
	elsif (($r->{reason} // '') eq 'duplicate') { $t->{duplicate}++ }
	else { $t->{other}++; $t->{example} //= to_json($r) }
}

subtest 'a busy stream of pipeline bundles with replays mixed in' => sub {
	my ($kids, $per) = (6, 20);
	$q->push_n('cin', $per, partition => "c$_", prefix => "c$_") for 0 .. $kids - 1;
	my @bg = map { my $c = $_; bg(sub {
		my %t;
		my $prev;
		while (1) {
			my ($s, $p) = $q->pop('cin', partition => "c$c", batch => 5);
			last unless $s == 200;
			for my $m (@{ $p->{messages} }) {
				my $body = { operations => [
					{ type => 'ack', transactionId => $m->{transactionId},
					  partitionId => $m->{partitionId}, leaseId => $m->{leaseId} },
					{ type => 'push', queue => 'cout', partition => "c$c",
					  transactionId => "out-$m->{transactionId}", payload => $m->{data} } ],
					kv => [ { op => 'incr', ns => 'stats', key => 'processed', forever => jtrue } ] };
				tally(\%t, txn($q, $body));
				tally(\%t, txn($q, $prev)) if $prev && $m->{data}{i} % 4 == 0;
				$prev = $body;
			}
		}
		return \%t;
	}) } 0 .. $kids - 1;
	my %sum;
	for my $r (map { $_->result(120) } @bg) {
		$sum{$_} += $r->{$_} // 0 for qw(ok duplicate other);
		$sum{example} //= $r->{example} // $r->{error};
	}
	is($sum{ok}, $kids * $per, 'every bundle committed once');
	is($sum{duplicate}, $kids * 4, 'every replay refused as a duplicate');
	is($sum{other}, 0, 'nothing else') or diag($sum{example});

	my (undef, $out) = $q->get('/api/v1/resources/queues/cout/depth');
	is($out->{totalMessages}, $kids * $per, 'each output stored exactly once');
	my (undef, $in) = $q->get('/api/v1/resources/queues/cin/depth');
	is($in->{totalPending}, 0, 'every input acked');
	is(kv_value('stats', 'processed'), $kids * $per, 'the kv counter counts committed bundles only');
	my (undef, $p) = $q->pop('cout', partition => 'c3', batch => 100);
	is_deeply(txns($p), [ map { "out-c3-$_" } 0 .. $per - 1 ], 'a partition\'s outputs in input order');
};

subtest 'bundles racing on one transactionId: it is produced once' => sub {
	my ($kids, $keys) = (8, 10);
	my @bg = map { my $c = $_; bg(sub {
		my %t;
		for my $k (0 .. $keys - 1) {
			tally(\%t, txn($q, { operations => [
				{ type => 'push', queue => 'race', transactionId => "key-$k", payload => { by => $c } } ],
				kv => [ { op => 'incr', ns => 'stats', key => "race-$k", forever => jtrue } ] }));
		}
		return \%t;
	}) } 1 .. $kids;
	my %sum;
	for my $r (map { $_->result(120) } @bg) {
		$sum{$_} += $r->{$_} // 0 for qw(ok duplicate other);
		$sum{example} //= $r->{example} // $r->{error};
	}
	is($sum{ok}, $keys, 'one winner per transactionId');
	is($sum{duplicate}, ($kids - 1) * $keys, 'every other bundle refused as a duplicate');
	is($sum{other}, 0, 'nothing else') or diag($sum{example});
	my (undef, $d) = $q->get('/api/v1/resources/queues/race/depth');
	is($d->{totalMessages}, $keys, 'one message per transactionId');
	is_deeply([ map { kv_value('stats', "race-$_") } 0 .. $keys - 1 ], [ (1) x $keys ],
		'each counter moved once: the losers\' kv writes are undone');
};

subtest 'bundles acking one lease and cursor from several connections' => sub {
	my ($kids, $n) = (4, 40);
	$q->push_n('shared', $n);
	my ($s, $p) = $q->pop('shared', batch => $n, leaseSeconds => 300);
	is(scalar @{ $p->{messages} // [] }, $n, "$n messages under one lease");
	my @msgs = @{ $p->{messages} };
	my @bg = map { my $c = $_; bg(sub {
		my %t;
		for (my $i = $c; $i < $n; $i += $kids) {
			my $m = $msgs[$i];
			tally(\%t, txn($q, { operations => [
				{ type => 'push', queue => 'shared-out', transactionId => "so-$i" },
				{ type => 'ack', transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
				  leaseId => $m->{leaseId} } ] }));
		}
		return \%t;
	}) } 0 .. $kids - 1;
	my %sum;
	for my $r (map { $_->result(120) } @bg) {
		$sum{$_} += $r->{$_} // 0 for qw(ok duplicate other);
		$sum{example} //= $r->{example} // $r->{error};
	}
	is($sum{ok}, $n, 'every bundle committed, in whatever order its ack arrived');
	is($sum{other} + $sum{duplicate}, 0, 'nothing refused') or diag($sum{example});
	my (undef, $d) = $q->get('/api/v1/resources/queues/shared/depth');
	is($d->{partitions}[0]{committed}, $n - 1, 'the whole batch is committed');
	my (undef, $o) = $q->get('/api/v1/resources/queues/shared-out/depth');
	is($o->{totalMessages}, $n, 'one output per bundle');
};

done_testing;
