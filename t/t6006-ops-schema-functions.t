#!/usr/bin/perl
# The functions of schema/functions/ are what runs (issue 7, item 7): a start records their
# digest; a start on a database whose functions differ from the compiled-in text (an older
# release, a hand edit) drops every queen_* function and re-creates the current ones, so no
# stale or removed definition lingers, and a start on an up-to-date database changes nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();
my $digest = $pg->psql('SELECT digest FROM queen_schema_functions');
like($digest, qr/^[0-9a-f]{32}$/, "the first start records the digest of the functions: $digest");
is($pg->psql("SELECT count(*) FROM pg_proc WHERE proname = 'queen_pop'"), '1',
	'one definition of queen_pop');
$q->push_n('sf', 2);
$q->stop;

# What an older release leaves behind: another digest, a function the files no longer have,
# and a function whose body is not the current one.
$pg->psql(q{UPDATE queen_schema_functions SET digest = 'from-an-older-release'});
$pg->psql(q{CREATE FUNCTION queen_zz_removed() RETURNS int LANGUAGE sql AS 'SELECT 1'});
$pg->psql(q{CREATE OR REPLACE FUNCTION queen_ts(p timestamptz) RETURNS text LANGUAGE sql
	IMMUTABLE AS $$ SELECT 'stale' $$});
my $applied_at = $pg->psql('SELECT applied_at FROM queen_schema_functions');

$q = start_queend();
is($pg->psql('SELECT digest FROM queen_schema_functions'), $digest,
	'a start with other functions in the database records the current digest again');
is($pg->psql("SELECT count(*) FROM pg_proc WHERE proname = 'queen_zz_removed'"), '0',
	'a function no longer in the files is dropped');
my (undef, $b) = $q->pop('sf', batch => 10);
like($b->{messages}[0]{createdAt} // '', iso_re(), 'the current definition of a changed function runs');
is(scalar @{ $b->{messages} // [] }, 2, 'data written before the re-creation is still read');
my $again = $pg->psql('SELECT applied_at FROM queen_schema_functions');
$q->stop;

$q = start_queend();
is($pg->psql('SELECT applied_at FROM queen_schema_functions'), $again,
	'a start on an up-to-date database re-creates nothing');
isnt($again, $applied_at, 'the re-creation was recorded');
$q->stop;

done_testing();
