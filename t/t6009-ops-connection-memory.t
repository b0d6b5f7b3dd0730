#!/usr/bin/perl
# A statement that sent or received more than 4 MiB has its database connection reopened once
# it is idle again: libpq keeps a connection's buffers at the largest message they ever held,
# so one 60 MB push left 60 MB resident in its connection for the broker's lifetime, and any
# worker can meet such a push or pop. The connections that carried the large statements are
# gone from pg_stat_activity afterwards, their replacements serve the next requests, and
# nothing of either request is lost.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend(QUEEN_PUSH_LANES => 1);

# The backends of the broker's connections (this test's psql is never one of them).
sub backends {
	my %b = map { $_ => 1 } grep { /^\d+$/ } split /\n/, $pg->psql(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' " .
		"AND application_name <> 'psql' AND pid <> pg_backend_pid()");
	return \%b;
}
sub gone { my ($before, $after) = @_; return scalar grep { !$after->{$_} } keys %$before }

# The backends of $before gone by now: a connection the broker closed leaves pg_stat_activity
# once its backend has exited, a moment after the close (waited for, up to 5 s), and its
# replacement is open already.
sub gone_soon {
	my $before = shift;
	my $after;
	wait_until(sub { $after = backends(); gone($before, $after) >= 1 }, 5);
	return ($after, gone($before, $after));
}

# Every connection opened and used once, so that the sets below compare like with like.
$q->push_n('warm', 10);
my $before = backends();
ok(scalar(keys %$before) > 0, 'the broker holds connections') or diag(explain($before));

subtest 'a push of over 4 MiB' => sub {
	my $pad = 'x' x 6000;
	my @items = map { +{ queue => 'big', partition => 'p' . ($_ % 4), transactionId => "b-$_",
			     payload => { i => $_, pad => $pad } } } 0 .. 999;
	my ($s, $b) = $q->push_items(@items);
	is($s, 201, 'the push of 6 MB is answered');
	is(scalar(grep { $_->{status} eq 'queued' } @$b), 1000, 'every item queued');
	my ($after, $gone) = gone_soon($before);
	ok($gone >= 1, 'the connection that stored it was closed')
		or diag(explain([$before, $after]));
	my ($s2, $b2) = $q->push_items({ queue => 'big', partition => 'p0', transactionId => 'after' });
	is($s2, 201, 'the next push is answered');
	is($b2->[0]{status}, 'queued', 'and queued, on a reopened connection');
	is($pg->psql("SELECT sum(cardinality(s.ids)) FROM queen_segments s " .
		"JOIN queen_partitions p ON p.id = s.partition_id JOIN queen_queues q " .
		"ON q.id = p.queue_id WHERE q.name = 'big'"), 1001, 'every item stored once');
	$before = backends();
};

subtest 'a pop answered with over 4 MiB' => sub {
	my ($s, $b) = $q->pop('big', batch => 1001, partitions => 4);
	is($s, 200, 'the pop is answered');
	is(scalar @{ $b->{messages} // [] }, 1001, 'with every message');
	my ($after, $gone) = gone_soon($before);
	ok($gone >= 1, 'the connection that read them was closed')
		or diag(explain([$before, $after]));
	my ($s2, $b2) = $q->ack_all($b);
	is($s2, 200, 'their ack is answered');
	is(scalar(grep { $_->{success} } @$b2), 1001, 'and every ack succeeds');
};

subtest 'statements of ordinary size keep their connections' => sub {
	$before = backends();
	$q->push_n('small', 100, prefix => "s$_") for 1 .. 5;
	my ($s) = $q->pop('small', batch => 500);
	is($s, 200, 'pops and pushes of ordinary size are answered');
	is(gone($before, backends()), 0, 'no connection was closed');
};

done_testing();
