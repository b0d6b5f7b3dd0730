#!/usr/bin/perl
# What the fuzzers of t/fuzz found, each seen from outside: the request that broke the broker
# gets its exact answer, and the broker is still up after it. The input that reproduced each
# bug in its fuzz target is in that target's corpus (t/fuzz/<target>/found-*).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub still_up {
	my ($why) = @_;
	my ($s) = $q->get('/health');
	is($s, 200, "$why: the broker is still up");
}

subtest 'a push body key holding many escapes overflowed the key buffer (fuzz-jscan)' => sub {
	# The scanner measured a key without counting its escapes, then decoded it into a
	# 16- or 24-byte stack buffer: a stack overflow written by the client's bytes.
	my $key = '\\\\' x 200;
	my ($s, $b, undef, $raw) = $q->request('POST', '/api/v1/push',
		qq({"$key":1,"items":[{"queue":"fz-esc","$key":"x","payload":{"$key":2}}]}));
	is($s, 201, 'top-level and item keys of 200 escapes: 201') or diag($raw);
	is(ref $b eq 'ARRAY' && $b->[0]{status}, 'queued', 'the item is queued');
	($s, $b, undef, $raw) = $q->request('POST', '/api/v1/push',
		'{"items":[{"' . ('\\u00e9' x 100) . '":1,"queue":"fz-esc"}]}');
	is($s, 201, 'an item key of 100 \\u escapes: 201') or diag($raw);
	my ($ps, $pb) = $q->pop('fz-esc', batch => 10);
	is($ps, 200, 'both pushed items pop');
	is(scalar @{ ($pb // {})->{messages} // [] }, 2, 'two messages');
	is_deeply($pb->{messages}[0]{data}, { '\\' x 200 => 2 }, 'the payload keeps its key');
	still_up('escaped keys');
};

subtest 'a push key holding \u0000 was read as the key before it (fuzz-jscan)' => sub {
	# Keys were compared as C strings: "queue\u0000x" matched "queue". jansson, which
	# parses every other route, refuses such a key; push now reads it as no key of its own.
	my ($s, $b, undef, $raw) = $q->request('POST', '/api/v1/push',
		'{"items":[{"queue\u0000x":"fz-nul"}]}');
	is($s, 400, 'an item whose only queue key holds \u0000: 400') or diag($raw);
	like($raw, qr/queue is required/, 'queue is required');
	($s, $b, undef, $raw) = $q->request('POST', '/api/v1/push',
		'{"items\u0000":[{"queue":"fz-nul"}]}');
	is($s, 400, 'an items key holding \u0000: 400') or diag($raw);
	($s) = $q->get('/api/v1/resources/queues/fz-nul');
	is($s, 404, 'nothing was pushed');
	($s, $b, undef, $raw) = $q->request('POST', '/api/v1/push',
		'{"items":[{"queue":"fz-nul","data\u0000":1,"payload":{"k\u0000":1}}]}');
	is($s, 201, 'unknown keys and payload keys holding \u0000 are still fine') or diag($raw);
	still_up('keys holding \u0000');
};

subtest 'a whole-number option of 1e300 was converted to an integer unchecked (fuzz-router)' => sub {
	for my $v ('1e300', '-1e300', '9223372036854775808.0', '1e19') {
		my ($s, $b, undef, $raw) = $q->request('POST', '/api/v1/configure',
			qq({"queue":"fz-big","options":{"leaseTime":$v,"maxSize":$v}}));
		is($s, 400, "leaseTime and maxSize $v: 400") or diag($raw);
		like($raw, qr/leaseTime/, "$v: the error names leaseTime");
	}
	my ($s, $b, undef, $raw) = $q->request('POST', '/api/v1/configure',
		'{"queue":"fz-big","options":{"leaseTime":30.0}}');
	is($s, 200, 'a whole number written as 30.0 is still accepted') or diag($raw);
	is(($b // {})->{options}{leaseTime}, 30, 'as 30');
	still_up('huge numbers');
};

done_testing();
