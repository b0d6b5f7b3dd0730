#!/usr/bin/perl
# Error bodies never carry PostgreSQL's own error text (SPEC 22); the log does, with the
# request id. Before, a transaction PostgreSQL failed answered "database error: canceling
# statement due to statement timeout". A row lock held past the statement timeout makes
# PostgreSQL fail it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend(QUEEN_STMT_TIMEOUT_MS => 500, LOG_LEVEL => 'info');

$q->push_n('locked', 1);
# Another session holds the partition's row lock longer than the statement timeout.
my $holder = bg(sub { $pg->psql('BEGIN; SELECT 1 FROM queen_partitions FOR UPDATE; ' .
	'SELECT pg_sleep(3); COMMIT;'); 1 });
sleep 1;
my ($s, $b, undef, $raw) = $q->post_json('/api/v1/transaction',
	{ operations => [ { type => 'push', items => [ { queue => 'locked', transactionId => 'l-1' } ] } ] });
is($s, 200, 'a transaction PostgreSQL cancels is still a 200 verdict');
is($b->{success}, JSON::PP::false, 'not committed');
is($b->{reason}, 'db_error', 'reason db_error');
is($b->{error}, 'database error', 'the error is the broker\'s own words');
unlike($raw, qr/cancel|statement|timeout|SQLSTATE/i, 'nothing of PostgreSQL\'s text');
$holder->result(20);
my $log = do { local (@ARGV, $/) = ($q->{log}); <> };
like($log, qr/req=\d+ .*statement timeout/, 'the log has PostgreSQL\'s text with the request id');

done_testing();
