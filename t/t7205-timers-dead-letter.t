#!/usr/bin/perl
# A timer that cannot be delivered (SPEC 14): the timers due with it are delivered anyway, it
# is retried (peek shows attempts and lastError), and after 5 failed attempts it goes to the
# dead-letter table with the last error as reason. The failure is injected with a trigger
# that refuses any segment holding the word "poison" (the one thing the API cannot do).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend();

$pg->psql(q{
	CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF array_to_string(NEW.payloads, ',') LIKE '%poison%' THEN
			RAISE EXCEPTION 'poisoned payload refused';
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER test_poison BEFORE INSERT ON queen_segments
	FOR EACH ROW EXECUTE FUNCTION test_poison();
});
is($pg->psql(q{SELECT count(*) FROM pg_trigger WHERE tgname = 'test_poison'}), 1,
	'failure injected');

my ($s, $b) = $q->post_json('/api/v1/timers', { operations => [
	map { +{ op => 'schedule', queue => 'dl', timerKey => $_->[0], delayMs => 0,
		txn => "txn-$_->[0]", payload => $_->[1] } }
	(['good-1', { ok => 1 }], ['bad', { word => 'poison' }], ['good-2', { ok => 2 }]) ] });
is($s, 200, 'three timers due at once, one of them undeliverable');
my %id = map { $_->{timerKey} => $_->{messageId} } @{ $b->{results} // [] };

my %got;
wait_until(sub {
	my ($ps, $pb) = $q->pop('dl', autoAck => 'true', batch => 10);
	$got{ $_->{transactionId} } = $_ for @{ $pb->{messages} // [] };
	return keys %got >= 2;
}, 30, 0.1);
is_deeply([sort keys %got], ['txn-good-1', 'txn-good-2'], 'the good timers were delivered');
is($got{'txn-good-2'}{id}, $id{'good-2'}, 'with their promised ids');

my $pk;
ok(wait_until(sub {
	(my $gs, $pk) = $q->get('/api/v1/timers/dl/bad');
	return $gs == 200 && $pk->{attempts} >= 1;
}, 30, 0.05), 'the bad timer stays pending after a failed attempt');
like($pk->{lastError} // '', qr/poisoned payload refused/, 'peek shows the last error');

ok(wait_until(sub { ($q->get('/api/v1/timers/dl/bad'))[0] == 404 }, 60, 0.2),
	'after its attempts it is no longer pending');
my ($ds, $d) = $q->get('/api/v1/dlq', { queue => 'dl' });
is($ds, 200, 'GET /api/v1/dlq');
is($d->{total}, 1, 'one dead letter');
my $row = $d->{messages}[0] // {};
is($row->{queue}, 'dl', 'queue');
is($row->{partition}, 'Default', 'partition');
is($row->{transactionId}, 'txn-bad', 'transactionId is the txn');
is($row->{consumerGroup}, '__TIMERS__', 'consumerGroup __TIMERS__');
like($row->{errorMessage} // '', qr/poisoned payload refused/, 'reason is the last error');
is($row->{retryCount}, 5, 'after 5 attempts');
is_deeply($row->{data}, { word => 'poison' }, 'with the payload');

my ($ps, $pb) = $q->pop('dl', autoAck => 'true');
is($ps, 204, 'and it was never delivered');

done_testing();
