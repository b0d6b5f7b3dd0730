package QueenRetention;
# Helpers shared by the retention tests (t91NN): where a partition's log stands, its
# segments, ageing segments, and waiting for retention rounds to run. Call
# retention_setup($broker, $pg) once, after start_pg and start_queend.
use strict;
use warnings;
use Exporter 'import';
use QueenTest;

our @EXPORT = qw(retention_setup partition_of segments age retention rounds_run wait_rounds);

my ($Q, $PG);

sub retention_setup {
	($Q, $PG) = @_;
}

# The queue detail's entry for one partition (name, id, logStart, logEnd, messages).
sub partition_of {
	my ($queue, $part) = @_;
	my (undef, $d) = $Q->get("/api/v1/resources/queues/$queue");
	my ($p) = grep { $_->{name} eq $part } @{ ($d // {})->{partitions} // [] };
	return $p // {};
}

# The segments of a partition as "base-end" strings, in offset order.
sub segments {
	my $pid = shift;
	my $s = $PG->psql("SELECT string_agg(base_offset || '-' || end_offset, ',' ORDER BY " .
		"base_offset) FROM queen_segments WHERE partition_id = '$pid'");
	return [ split /,/, $s ];
}

# Moves the segments below offset $below back in time by $secs (order along offsets kept).
sub age {
	my ($pid, $below, $secs) = @_;
	$PG->psql("UPDATE queen_segments SET created_at = created_at - interval '$secs seconds' " .
		"WHERE partition_id = '$pid' AND base_offset < $below");
}

# The retention counters of GET /api/v1/status.
sub retention {
	my (undef, $s) = $Q->get('/api/v1/status');
	return ($s // {})->{retention} // {};
}

# Rounds of retention that ran (not skipped, not failed) so far.
sub rounds_run {
	my $r = retention();
	return ($r->{rounds} // 0) - ($r->{skipped} // 0) - ($r->{failed} // 0);
}

# Waits until $n more rounds have run.
sub wait_rounds {
	my $n = shift;
	my $start = rounds_run();
	return wait_until(sub { rounds_run() >= $start + $n }, 60, 0.1);
}

1;
