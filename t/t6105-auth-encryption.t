#!/usr/bin/perl
# Payload encryption (SPEC 17): a queue with encryptionEnabled stores AES-256-GCM envelopes
# (read back here with psql: no plaintext in PostgreSQL, nor in the spool), every read path
# returns the plaintext (pop, message list and detail, dead letters, replay, timer peek),
# QUEEN_ENCRYPTION_KEY_PREVIOUS opens what an old key sealed, an envelope no key opens comes
# back marked isEncrypted; without a key a configure is a 400 and a push a 503 storing nothing.
use strict;
use warnings;
use Test::More;
use MIME::Base64 qw(decode_base64);
use QueenTest;

my $pg = start_pg();
my ($k1, $k2) = map { join '', map { sprintf '%02x', int rand 256 } 1 .. 32 } 1 .. 2;
my $marker = 'plaintext-marker-6105';
my $spool = QueenTest::tmpdir() . '/spool-enc';
mkdir $spool;
my $b = start_queend(QUEEN_ENCRYPTION_KEY => $k1, FILE_BUFFER_DIR => $spool);

my ($s, $j) = $b->configure('enc', encryptionEnabled => jtrue);
is($s, 200, 'configure encryptionEnabled:true with a key');
is_true($j->{options}{encryptionEnabled}, '... echoed');
$b->configure('plain');

sub stored {
	my ($q) = @_;
	return $pg->psql("SELECT string_agg(array_to_string(s.payloads, E'\\n'), E'\\n' ORDER BY "
		. "s.base_offset) FROM queen_segments s JOIN queen_partitions p ON p.id = "
		. "s.partition_id JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = '$q'");
}

($s, $j) = $b->push_items({ queue => 'enc', transactionId => 'e1',
	payload => { secret => $marker, n => [ 1, 2 ] } },
	{ queue => 'plain', payload => { secret => $marker } });
is($s, 201, 'push to an encrypted and a plain queue');
my $row = stored('enc');
unlike($row, qr/\Q$marker\E/, 'PostgreSQL holds no plaintext of the encrypted queue');
my $env = from_json((split /\n/, $row)[0]);
is_deeply([ sort keys %{ $env // {} } ], [qw(authTag encrypted iv)],
	'the stored payload is the envelope {encrypted, iv, authTag}');
is(length(decode_base64($env->{iv})), 12, '... with a 12-byte IV');
is(length(decode_base64($env->{authTag})), 16, '... and a 16-byte tag');
like(stored('plain'), qr/\Q$marker\E/, 'a plain queue stores the payload as sent');

# A second message with the same payload: a fresh IV, so another ciphertext.
$b->push_items({ queue => 'enc', transactionId => 'e2', payload => { secret => $marker, n => [ 1, 2 ] } });
my @rows = split /\n/, stored('enc');
isnt(from_json($rows[1])->{encrypted}, $env->{encrypted}, 'the same payload seals differently');

# Read paths.
($s, $j) = $b->pop('enc', batch => 10, consumerGroup => 'g1', subscriptionMode => 'all');
is_deeply([ map { $_->{data} } @{ $j->{messages} } ],
	[ ({ secret => $marker, n => [ 1, 2 ] }) x 2 ], 'pop returns the plaintext');
my $m = $j->{messages}[0];
($s, $j) = $b->get("/api/v1/messages/$m->{partitionId}/e1");
is_deeply($j->{payload}, { secret => $marker, n => [ 1, 2 ] }, 'message detail: plaintext');
($s, $j) = $b->get('/api/v1/messages', { queue => 'enc' });
is($s, 200, 'message list (no payloads in it)');
unlike(to_json($j), qr/encrypted/, '... shows no envelope either');
$b->ack_batch('g1', { transactionId => 'e1', partitionId => $m->{partitionId},
	leaseId => $m->{leaseId}, status => 'dlq', error => 'x' });
($s, $j) = $b->get('/api/v1/dlq', { queue => 'enc' });
is_deeply($j->{messages}[0]{data}, { secret => $marker, n => [ 1, 2 ] }, 'dead letter: plaintext');
unlike($pg->psql("SELECT payload FROM queen_dlq"), qr/\Q$marker\E/, 'the dead letter row is sealed');
($s, $j) = $b->post_json("/api/v1/dlq/$j->{messages}[0]{id}/replay", {});
is($j->{result}, 'moved', 'replay');
($s, $j) = $b->pop('enc', batch => 10, consumerGroup => 'g2', subscriptionMode => 'all');
my ($replayed) = grep { $_->{transactionId} =~ /^dlq:/ } @{ $j->{messages} };
is_deeply($replayed->{data}, { secret => $marker, n => [ 1, 2 ] }, 'the replayed message: plaintext');

# Transactions and timers.
my $t = $b->transaction({ operations => [ { type => 'push', items => [
	{ queue => 'enc', transactionId => 'tx1', payload => { secret => $marker } } ] } ],
	timers => [ { op => 'schedule', queue => 'enc', timerKey => 'later', delayMs => 600000,
		      txn => 'tm1', payload => { secret => $marker } } ] }, 'transaction');
is_true($t->{success}, 'a transaction pushes and schedules on the encrypted queue');
unlike(stored('enc'), qr/\Q$marker\E/, 'its push is sealed');
unlike($pg->psql("SELECT payload FROM queen_timers"), qr/\Q$marker\E/, 'its timer is sealed');
($s, $j) = $b->get('/api/v1/timers/enc/later');
is_deeply($j->{payload}, { secret => $marker }, 'timer peek: plaintext');

# The plaintext comes back as it was sent, as from a plain queue: an integer past 64 bits, the
# form of a number and a repeated key are the client's, not a JSON library's.
my $odd = '{"n":123456789012345678901234567890,"f":1.10,"d":1,"d":2}';
($s) = $b->request('POST', '/api/v1/push', '{"items":[{"queue":"enc","transactionId":"odd1",'
	. '"payload":' . $odd . '},{"queue":"plain","transactionId":"odd2","payload":' . $odd . '}]}');
is($s, 201, 'push a payload a JSON tree would not hold');
for my $q (qw(enc plain)) {
	my (undef, $p, undef, $raw) = $b->request('GET', "/api/v1/pop/queue/$q?batch=100"
		. '&consumerGroup=odd&subscriptionMode=all');
	my ($it) = grep { $_->{transactionId} =~ /^odd/ } @{ $p->{messages} // [] };
	ok($it && index($raw, '"data":' . $odd) >= 0, "pop from the $q queue returns it as sent");
	next unless $q eq 'enc' && $it;
	(undef, undef, undef, $raw) = $b->request('GET', "/api/v1/messages/$it->{partitionId}/odd1");
	ok(index($raw, '123456789012345678901234567890') >= 0 && $raw !~ /isEncrypted/,
		'message detail: the same plaintext');
}

# The spool never holds plaintext either.
$b->post_json('/api/v1/system/maintenance', { enabled => jtrue });
($s, $j) = $b->push_items({ queue => 'enc', transactionId => 'sp1', payload => { secret => $marker } });
is($j->[0]{status}, 'buffered', 'a push during maintenance is buffered');
my $ondisk = join '', map { QueenTest::_slurp($_) } glob("$spool/*.spool");
ok(length $ondisk, 'the spool holds it');
unlike($ondisk, qr/\Q$marker\E/, '... sealed');
$b->post_json('/api/v1/system/maintenance', { enabled => jfalse });
ok(wait_until(sub { ($b->get('/api/v1/status/buffers'))[1]{pendingCount} == 0 }, 15),
	'the spool drains');
$b->stop;

# Rotation: the old key as previous opens old payloads; new ones use the new key.
my $r = start_queend(QUEEN_ENCRYPTION_KEY => $k2, QUEEN_ENCRYPTION_KEY_PREVIOUS => "$k1");
$r->push_items({ queue => 'enc', transactionId => 'new1', payload => { v => 'k2' } });
($s, $j) = $r->pop('enc', batch => 100, consumerGroup => 'g3', subscriptionMode => 'all');
my %by = map { $_->{transactionId} => $_->{data} } @{ $j->{messages} };
is_deeply($by{e2}, { secret => $marker, n => [ 1, 2 ] }, 'rotation: the previous key opens old payloads');
is_deeply($by{new1}, { v => 'k2' }, 'rotation: the new key seals and opens new ones');
$r->stop;

my $only2 = start_queend(QUEEN_ENCRYPTION_KEY => $k2);
($s, $j) = $only2->pop('enc', batch => 100, consumerGroup => 'g4', subscriptionMode => 'all');
%by = map { $_->{transactionId} => $_->{data} } @{ $j->{messages} };
is_true($by{e2}{isEncrypted}, 'an envelope no configured key opens comes back with isEncrypted:true');
ok(exists $by{e2}{encrypted} && exists $by{e2}{iv}, '... as the stored envelope');
is_deeply($by{new1}, { v => 'k2' }, '... while what the key opens is plaintext');
my ($e2) = grep { $_->{transactionId} eq 'e2' } @{ $j->{messages} };
($s, $j) = $only2->get("/api/v1/messages/$e2->{partitionId}/e2");
is_true($j->{payload}{isEncrypted}, 'message detail: the same envelope marked isEncrypted');
is(join(',', sort keys %{ $j->{payload} }), 'authTag,encrypted,isEncrypted,iv', '... and nothing else');
$only2->stop;

# Without a key.
my $nokey = start_queend();
my $before = $pg->psql("SELECT count(*) FROM queen_segments");
($s, $j) = $nokey->push_items({ queue => 'enc', payload => { secret => $marker } });
is($s, 503, 'a push to an encrypted queue on a broker without the key: 503');
is_deeply($j, { error => 'encryption key not configured' }, '... with the body of SPEC 17');
is($pg->psql("SELECT count(*) FROM queen_segments"), $before, '... and nothing stored');
($s, $j) = $nokey->configure('enc2', encryptionEnabled => jtrue);
is($s, 400, 'configure encryptionEnabled:true without a key: 400');
like(to_json($j->{invalid}), qr/encryptionEnabled/, '... naming encryptionEnabled');
($s, $j) = $nokey->pop('enc', batch => 100, consumerGroup => 'g5', subscriptionMode => 'all');
ok((grep { JSON::PP::is_bool($_->{data}{isEncrypted}) } @{ $j->{messages} }) > 0,
	'without any key, stored envelopes are returned marked isEncrypted');
$nokey->stop;

my ($st, $out) = run_queend(['--check-config'], QUEEN_ENCRYPTION_KEY => $k1,
	QUEEN_ENCRYPTION_KEY_PREVIOUS => "$k2,abc");
isnt($st, 0, 'a malformed QUEEN_ENCRYPTION_KEY_PREVIOUS is a start-up error');
like($out, qr/QUEEN_ENCRYPTION_KEY_PREVIOUS/, '... naming it');
unlike($out, qr/\Q$k2\E/, '... without printing the keys');

done_testing;
