#!/usr/bin/perl
# Push requests the broker must refuse (SPEC 2, 4): 400 with a clear error, for the whole
# request, and nothing written -- not even the valid items of a rejected request.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

sub rejected {
	my ($body, $why) = @_;
	my ($s, $j) = ref $body ? $q->post_json('/api/v1/push', $body)
		: $q->request('POST', '/api/v1/push', $body);
	is($s, 400, "$why: 400");
	ok(ref $j eq 'HASH' && defined $j->{error} && length $j->{error},
		"$why: error says what: " . ($j && ref $j eq 'HASH' ? $j->{error} // '' : ''));
	return $j;
}

my $ok = { queue => 'ok-q', payload => 1 };

my $j = rejected({ items => { queue => 'ok-q' } }, 'items is an object, not an array');
like($j->{error}, qr/^bad body: /, 'wrong type is a "bad body"');
rejected({ items => 'ok-q' }, 'items is a string');
rejected({}, 'items missing');
rejected([ $ok ], 'body is an array');
rejected({ items => [ $ok, 'not an object' ] }, 'an item is not an object');
rejected({ items => [ $ok, { payload => 1 } ] }, 'an item without queue');
rejected({ items => [ $ok, { queue => '' } ] }, 'an empty queue name');
rejected({ items => [ $ok, { queue => 42 } ] }, 'queue is a number');
rejected({ items => [ $ok, { queue => 'ok-q', partition => [] } ] }, 'partition is an array');
rejected({ items => [ $ok, { queue => 'ok-q', transactionId => 7 } ] }, 'transactionId is a number');
rejected({ items => [ $ok, { queue => "bad\x01queue" } ] }, 'control character in queue');
rejected({ items => [ $ok, { queue => 'ok-q', partition => "line\nbreak" } ] },
	'control character in partition');
rejected({ items => [ $ok, { queue => 'ok-q', transactionId => "tab\there" } ] },
	'control character in transactionId');
rejected({ items => [ $ok, { queue => 'ok-q', transactionId => 'x' x 65536 } ] },
	'transactionId of 65536 bytes');
$j = rejected('{"items":[{"queue":"ok-q"}', 'truncated JSON');
like($j->{error}, qr/^bad body: /, 'malformed JSON is a "bad body"');
rejected('', 'empty body');

subtest 'nothing of the rejected requests was written' => sub {
	my ($s) = $q->get('/api/v1/resources/queues/ok-q');
	is($s, 404, 'ok-q was never created');
	my $list = queue_list($q);
	ok($list, 'GET /api/v1/resources/queues answers the list');
	my @names = map { $_->{name} // $_->{queue} } @{ $list // [] };
	is_deeply(\@names, [], 'no queue exists at all');
};

subtest 'the limits themselves are accepted' => sub {
	my ($s, $b) = $q->push_items({ queue => 'ok-q', transactionId => 'x' x 65535 });
	is($s, 201, 'transactionId of 65535 bytes');
	is($b->[0]{status}, 'queued', 'queued');
	my (undef, $pop) = $q->pop('ok-q');
	is(length($pop->{messages}[0]{transactionId} // ''), 65535, 'and it comes back whole');
};

done_testing;
