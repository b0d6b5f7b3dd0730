#!/usr/bin/perl
# What POST /api/v1/timers refuses, and how (SPEC 2, 14, 21): malformed operations are 400
# with code timers_bad_request (and the index of the operation), a delay beyond the 90-day
# horizon is 403, a payload over 1 MiB is 413; a refused call schedules nothing. Payloads sent
# the reference client's way (base64 of the JSON text with payloadZstd:false) are decoded.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use MIME::Base64 qw(encode_base64);
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

my $DAY_MS = 86400 * 1000;

sub post { $q->post_json('/api/v1/timers', { operations => [@_] }) }
sub sched { +{ op => 'schedule', queue => 'iq', timerKey => 'k', delayMs => 600000, @_ } }

sub refused {
	my ($what, $status, $code, $ops, $index) = @_;
	my ($s, $b) = ref $ops eq 'ARRAY' ? post(@$ops) : $q->post_json('/api/v1/timers', $ops);
	is($s, $status, "$what: $status") or diag(explain $b);
	ok(defined $b->{error} && length $b->{error}, "$what: says why ($b->{error})");
	is($b->{code}, $code, "$what: code $code") if defined $code;
	is($b->{index}, $index, "$what: names operation $index") if defined $index;
	return $b;
}

subtest 'malformed calls: 400 timers_bad_request' => sub {
	my ($s, $b) = $q->request('POST', '/api/v1/timers', '{"operations":[');
	is($s, 400, 'unparsable JSON: 400');
	refused('operations missing', 400, 'timers_bad_request', { ops => [] });
	refused('operations not an array', 400, 'timers_bad_request', { operations => {} });
	refused('257 operations', 400, 'timers_bad_request',
		[map { sched(timerKey => "k$_") } 1 .. 257]);
	refused('an operation that is not an object', 400, 'timers_bad_request', [sched(), 'x'], 1);
	refused('unknown op', 400, 'timers_bad_request', [{ op => 'snooze', queue => 'iq',
		timerKey => 'k' }], 0);
	refused('no op', 400, 'timers_bad_request', [{ queue => 'iq', timerKey => 'k',
		delayMs => 1 }], 0);
	refused('no queue', 400, 'timers_bad_request', [sched(queue => undef)], 0);
	refused('empty queue', 400, 'timers_bad_request', [sched(queue => '')], 0);
	refused('queue with a control character', 400, 'timers_bad_request',
		[sched(queue => "i\nq")], 0);
	refused('no timerKey', 400, 'timers_bad_request', [sched(), sched(timerKey => undef)], 1);
	refused('timerKey not a string', 400, 'timers_bad_request', [sched(timerKey => 7)], 0);
	refused('timerKey over 512 bytes', 400, 'timers_bad_request',
		[sched(timerKey => 'x' x 513)], 0);
	refused('empty partition', 400, 'timers_bad_request', [sched(partition => '')], 0);
	refused('no delayMs', 400, 'timers_bad_request', [sched(delayMs => undef)], 0);
	refused('negative delayMs', 400, 'timers_bad_request', [sched(delayMs => -1)], 0);
	refused('delayMs as a string', 400, 'timers_bad_request', [sched(delayMs => '1000')], 0);
	refused('fractional delayMs', 400, 'timers_bad_request', [sched(delayMs => 1.5)], 0);
	refused('empty txn', 400, 'timers_bad_request', [sched(txn => '')], 0);
	refused('txn not a string', 400, 'timers_bad_request', [sched(txn => 12)], 0);
	refused('cancel without timerKey', 400, 'timers_bad_request',
		[{ op => 'cancel', queue => 'iq' }], 0);
	refused('payloadZstd:true', 400, 'timers_bad_request',
		[sched(payload => encode_base64('{}', ''), payloadZstd => jtrue)], 0);
	refused('payloadZstd not a boolean', 400, 'timers_bad_request',
		[sched(payload => 'e30=', payloadZstd => 'no')], 0);
	refused('payloadZstd:false with an object payload', 400, 'timers_bad_request',
		[sched(payload => { a => 1 }, payloadZstd => jfalse)], 0);
	refused('payloadZstd:false with bad base64', 400, 'timers_bad_request',
		[sched(payload => 'not*base64!', payloadZstd => jfalse)], 0);
	refused('payloadZstd:false with base64 of something not JSON', 400, 'timers_bad_request',
		[sched(payload => encode_base64('{nope', ''), payloadZstd => jfalse)], 0);
	my ($s2, $l) = $q->get('/api/v1/timers/iq');
	is_deeply($l->{timers}, [], 'nothing was scheduled by any of them');
};

subtest 'the horizon is 90 days: beyond is 403' => sub {
	refused('90 days and 1 ms', 403, 'timers_horizon', [sched(delayMs => 90 * $DAY_MS + 1)], 0);
	refused('a year', 403, 'timers_horizon', [sched(timerKey => 'y', delayMs => 365 * $DAY_MS)],
		0);
	my ($s, $b) = post(sched(timerKey => 'edge', delayMs => 90 * $DAY_MS));
	is($s, 200, 'exactly 90 days is accepted');
	is($b->{results}[0]{status}, 'scheduled', 'and scheduled');
};

subtest 'payloads over 1 MiB: 413' => sub {
	# A JSON string of n characters is n + 2 bytes of JSON text.
	my $b = refused('a 1 MiB + 1 byte payload', 413, 'timers_payload_too_large',
		[sched(timerKey => 'big', payload => 'x' x (1024 * 1024 - 1))], 0);
	is($b->{limit}, 1048576, 'the limit is named');
	refused('the same as base64', 413, 'timers_payload_too_large',
		[sched(timerKey => 'big64', payloadZstd => jfalse,
			payload => encode_base64('"' . ('x' x (1024 * 1024 - 1)) . '"', ''))], 0);
	my ($s, $r) = post(sched(timerKey => 'max', payload => 'x' x (1024 * 1024 - 2)));
	is($s, 200, 'exactly 1 MiB is accepted');
	($s, $r) = $q->get('/api/v1/timers/iq/max');
	is(length($r->{payload} // ''), 1024 * 1024 - 2, 'and kept whole');
};

subtest 'a call with one bad operation schedules none of the others' => sub {
	my ($s) = post(sched(queue => 'atomic', timerKey => 'good'),
		sched(queue => 'atomic', timerKey => 'bad', delayMs => -5));
	is($s, 400, 'refused');
	is(($q->get('/api/v1/timers/atomic/good'))[0], 404, 'the good one was not scheduled');
};

subtest 'payloadZstd:false: payload is base64 of the JSON text' => sub {
	my $json = '{"orderId":9137,"items":[1,2,3],"note":"caf\u00e9"}';
	my ($s, $b) = post({ op => 'schedule', queue => 'b64', timerKey => 'x', delayMs => 0,
		payload => encode_base64($json, ''), payloadZstd => jfalse });
	is($s, 200, 'scheduled');
	my $id = $b->{results}[0]{messageId};
	my $m;
	wait_until(sub {
		my ($ps, $pb) = $q->pop('b64', autoAck => 'true');
		$m = $pb->{messages}[0] if $ps == 200;
		return $m;
	}, 30, 0.1);
	ok($m, 'delivered');
	is($m->{id}, $id, 'with the promised id');
	is_deeply($m->{data}, { orderId => 9137, items => [1, 2, 3], note => "caf\x{e9}" },
		'the payload is the decoded JSON');

	($s, $b) = post({ op => 'schedule', queue => 'b64', timerKey => 'peek', delayMs => 600000,
		payload => encode_base64('[true,null]', ''), payloadZstd => jfalse });
	my ($gs, $g) = $q->get('/api/v1/timers/b64/peek');
	is_deeply($g->{payload}, [jtrue, undef], 'peek shows the decoded payload');
	($s, $b) = post({ op => 'schedule', queue => 'b64', timerKey => 'plain', delayMs => 600000,
		payload => 'e30=', payloadZstd => undef });
	($gs, $g) = $q->get('/api/v1/timers/b64/plain');
	is($g->{payload}, 'e30=', 'without payloadZstd a string payload is just a string');
};

done_testing();
