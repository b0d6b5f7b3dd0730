#!/usr/bin/perl
# Lease extend (SPEC 7): renews every live lease held by one lease id, never shortens,
# never revives; the verdict is in the 200 body.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use QueenTest;

start_pg();
my $q = start_queend();

sub extend {
	my ($lease, $body) = @_;
	my $path = "/api/v1/lease/$lease/extend";
	my ($s, $b) = defined $body ? $q->post_json($path, $body) : $q->request('POST', $path);
	is($s, 200, 'extend answers 200' . (defined $body ? ' (' . to_json($body) . ')' : ' (no body)'));
	return $b // {};
}

sub renewed_ok {
	my ($b, $lease, $count, $seconds) = @_;
	is($b->{leaseId}, $lease, 'leaseId echoed');
	is_true($b->{success}, 'success true');
	is($b->{renewed}, $count, "renewed $count");
	like($b->{expiresAt} // '', iso_re, 'expiresAt is an ISO timestamp');
	is($b->{newExpiresAt}, $b->{expiresAt}, 'newExpiresAt is the same value');
	is($b->{lease_expires_at}, $b->{expiresAt}, 'lease_expires_at is the same value');
	my $left = (iso_epoch($b->{expiresAt}) // 0) - time;
	ok(abs($left - $seconds) < 10, sprintf('expires in about %d s (%.1f)', $seconds, $left));
}

sub nothing_renewed {
	my ($b, $why) = @_;
	is_false($b->{success}, "$why: success false");
	is($b->{renewed}, 0, "$why: renewed 0");
	is_null($b, $_, "$why: $_ null") for qw(expiresAt newExpiresAt lease_expires_at);
}

subtest 'one pop over three partitions: one extend renews all three' => sub {
	$q->push_n('ext', 1, partition => "p$_", prefix => "p$_") for 1 .. 3;
	my ($s, $b) = $q->pop('ext', partitions => 3, leaseSeconds => 2);
	is($b->{partitionsClaimed}, 3, 'three partitions claimed, 2 s lease');
	my $lease = $b->{leaseId};
	renewed_ok(extend($lease, { seconds => 60 }), $lease, 3, 60);
	sleep 2.5;	# past the original expiry, the behaviour under test
	($s) = $q->pop('ext');
	is($s, 204, 'past the original 2 s the partitions are still leased');
	my (undef, $r) = $q->ack_batch(undef, { transactionId => 'p1-0',
		partitionId => (grep { $_->{transactionId} eq 'p1-0' } @{ $b->{messages} })[0]{partitionId},
		leaseId => $lease, status => 'completed' });
	is_true($r->[0]{success}, 'acking p1 under the renewed lease works');
	renewed_ok(extend($lease, { seconds => 60 }), $lease, 2, 60);
	$q->ack_all($b);
	nothing_renewed(extend($lease, { seconds => 60 }), 'all acked');
};

subtest 'seconds defaults to 60' => sub {
	$q->push_n('dflt', 1);
	my (undef, $b) = $q->pop('dflt', leaseSeconds => 5);
	renewed_ok(extend($b->{leaseId}), $b->{leaseId}, 1, 60);
	renewed_ok(extend($b->{leaseId}, {}), $b->{leaseId}, 1, 60);
};

subtest 'never shortens' => sub {
	$q->push_n('long', 1);
	my (undef, $b) = $q->pop('long', leaseSeconds => 120);
	my $e = extend($b->{leaseId}, { seconds => 1 });
	is($e->{renewed}, 1, 'the live lease is counted');
	my $left = (iso_epoch($e->{expiresAt}) // 0) - time;
	ok($left > 100, sprintf('expiry stays about 120 s away (%.0f)', $left));
	sleep 1.5;
	my ($s) = $q->pop('long');
	is($s, 204, 'still leased');
};

subtest 'an expired lease is not revived' => sub {
	$q->push_n('gone', 1);
	my (undef, $b) = $q->pop('gone', leaseSeconds => 1);
	sleep 1.5;	# let it expire
	nothing_renewed(extend($b->{leaseId}, { seconds => 60 }), 'expired');
	my ($s, $again) = $q->pop('gone');
	is($s, 200, 'the message is free again');
	is($again->{messages}[0]{deliveryAttempt}, 2, 'and redelivers');
};

subtest 'an unknown lease id' => sub {
	nothing_renewed(extend('01890a5d-ac96-774b-bcce-b302099a8057', { seconds => 30 }), 'unknown');
	nothing_renewed(extend('not-a-uuid', { seconds => 30 }), 'not a uuid');
};

done_testing;
