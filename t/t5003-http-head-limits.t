#!/usr/bin/perl
# Request heads (SPEC 2, 22): a URL past QUEEN_MAX_URL_BYTES gets 414, header fields past
# QUEEN_MAX_HEADERS or QUEEN_MAX_HEADER_BYTES get 431, each with a JSON body like every other
# error of the broker -- libmicrohttpd used to refuse them itself with an HTML page. Heads
# within the limits are served. Past the connection's memory (QUEEN_CONNECTION_MEMORY_BYTES)
# libmicrohttpd still answers on its own, and its answer goes out as the broker's JSON too,
# as does its 400 for a head it cannot parse. A request line it cannot parse at all, which it
# answered by closing the connection, gets the broker's 400 too. A query string past QUEEN_MAX_QUERY_PARAMS gets 414
# before libmicrohttpd fills the connection's memory with it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use QueenTest;

start_pg();
my $q = start_queend();

# A request head of our own making, straight onto a socket.
sub head {
	my ($target, @fields) = @_;
	return "GET $target HTTP/1.1\r\nHost: x\r\n" . join('', map { "$_\r\n" } @fields) . "\r\n";
}
sub fields { my ($n) = @_; map { "X-F$_: y" } 1 .. $n }

# Sends a head to a broker and checks the refusal: its status, and its JSON body.
sub refused {
	my ($broker, $bytes, $status, $want, $name) = @_;
	my ($s, $b, $h) = $broker->raw($bytes);
	is($s, $status, "$name: $status");
	like($h->{'content-type'} // '', qr{^application/json}, "$name: as JSON");
	is_deeply($b, $want, "$name: " . QueenTest::to_json($want));
}
sub url_too_long { { error => 'URL too long', limit => $_[0] } }
sub too_large { { error => 'request header fields too large', limit => $_[0] } }

# A broker whose connection memory is 16 KiB, with limits that memory holds.
my $small = start_queend(QUEEN_CONNECTION_MEMORY_BYTES => 16384, QUEEN_MAX_URL_BYTES => 2048,
	QUEEN_MAX_HEADER_BYTES => 4096, QUEEN_MAX_HEADERS => 32, QUEEN_MAX_QUERY_PARAMS => 32);

subtest 'a 32 KB URL: 414 {"error":"URL too long","limit":8192}' => sub {
	refused($q, head('/api/v1/resources/queues/' . ('a' x 32768)), 414, url_too_long(8192),
		'32 KB path');
	refused($q, head('/health?pad=' . ('b' x 32768)), 414, url_too_long(8192),
		'32 KB query string');

	my $target = '/health?pad=' . ('c' x (8192 - length '/health?pad='));
	is(length $target, 8192, 'a URL of exactly 8192 bytes ...');
	my ($s) = $q->raw(head($target));
	is($s, 200, '... is served');
	($s) = $q->raw(head($target . 'c'));
	is($s, 414, 'one byte more is not');
};

subtest 'header fields past QUEEN_MAX_HEADERS or QUEEN_MAX_HEADER_BYTES: 431 in JSON' => sub {
	my ($s) = $q->raw(head('/health', fields(99)));
	is($s, 200, '100 header fields (Host and 99 more) are served');
	my $too_many = { error => 'too many request header fields', limit => 100 };
	refused($q, head('/health', fields(100)), 431, $too_many, '101 fields');
	refused($q, head('/health', fields(500)), 431, $too_many, '500 fields');

	# "Host: x" and its CRLF are 9 bytes; each field counts "Name: value" and CRLF.
	my $big = 'X-Big: ' . ('v' x (16384 - 9 - 9));
	($s) = $q->raw(head('/health', $big));
	is($s, 200, 'header fields of 16384 bytes in all are served');
	refused($q, head('/health', $big . 'v'), 431, too_large(16384), '16385 bytes');
	# libmicrohttpd copies a cookie to parse it: it takes twice its size of the head.
	refused($q, head('/health', 'Cookie: ' . ('k' x 24000)), 431, too_large(16384),
		'a 24 KB cookie');
	refused($q, head('/health', 'X-Big: ' . ('v' x 40000)), 431, too_large(16384),
		'a 40 KB field');
};

subtest 'a query string past QUEEN_MAX_QUERY_PARAMS: 414 in JSON' => sub {
	my $params = sub { '/health?' . join('&', map { "p$_=1" } 1 .. $_[0]) };
	my $too_many = { error => 'too many query parameters', limit => 64 };
	my ($s) = $q->raw(head($params->(64)));
	is($s, 200, '64 query parameters are served');
	refused($q, head($params->(65)), 414, $too_many, '65 parameters');
	# 3,000 short parameters fit QUEEN_MAX_URL_BYTES but not the connection's memory:
	# libmicrohttpd 0.9.75 left such a request unanswered.
	my $many = '/api/v1/resources/queues?' . join('&', ('a') x 3000);
	cmp_ok(length $many, '<', 8192, '3,000 parameters within the URL limit ...');
	refused($q, head($many), 414, $too_many, '... 3,000 parameters');
	# Cookies are parsed by libmicrohttpd into the same memory; the broker reads none.
	refused($q, head('/health', 'Cookie: ' . join('; ', map { "c$_=1" } 1 .. 2000)), 431,
		too_large(16384), '2,000 cookies past the connection memory, one answer');
	($s) = $q->get('/health');
	is($s, 200, 'and the broker goes on serving');
};

subtest 'every limit reached at once in one head is served' => sub {
	# QUEEN_MAX_URL_BYTES with QUEEN_MAX_QUERY_PARAMS parameters, QUEEN_MAX_HEADERS fields
	# of QUEEN_MAX_HEADER_BYTES in all: what QUEEN_CONNECTION_MEMORY_BYTES is checked to hold.
	my $at_limits = sub {
		my ($broker, $url_bytes, $params, $fields, $field_bytes) = @_;
		my $target = '/health?' . join('&', map { "p$_=1" } 2 .. $params) . '&pad=';
		$target .= 'u' x ($url_bytes - length $target);
		# Host (9 bytes with its CRLF) and fields - 1 more sharing the rest of the bytes.
		my @f = map { sprintf 'X-F%03d: ', $_ } 1 .. $fields - 1;
		my $room = $field_bytes - 9 - 2 * @f - length join '', @f;
		$f[$_] .= 'v' x int($room / @f) for 0 .. $#f;
		$f[0] .= 'v' x ($room % @f);
		my ($s) = $broker->raw(head($target, @f));
		return $s;
	};
	is($at_limits->($q, 8192, 64, 100, 16384), 200, 'the defaults, at 64 KiB');
	is($at_limits->($small, 2048, 32, 32, 4096), 200, 'limits of a 16 KiB head, at 16 KiB');
};

subtest 'the limits are settings; 10,000 header fields get JSON with a 1 MiB head' => sub {
	my $wide = start_queend(QUEEN_CONNECTION_MEMORY_BYTES => 1048576, QUEEN_MAX_HEADERS => 200,
		QUEEN_MAX_URL_BYTES => 300);
	refused($wide, head('/health', fields(10000)), 431,
		{ error => 'too many request header fields', limit => 200 }, '10,000 fields');
	my ($s) = $wide->raw(head('/health', fields(199)));
	is($s, 200, '200 header fields are served');
	refused($wide, head('/api/v1/resources/queues/' . ('a' x 300000)), 414, url_too_long(300),
		'a 300 KB URL');
	($s) = $wide->get('/api/v1/resources/queues/' . ('a' x 200));
	is($s, 404, 'a 226-byte URL is served (unknown queue)');
};

subtest 'past the connection memory libmicrohttpd answers itself, in the broker\'s JSON' => sub {
	refused($q, head('/health', fields(10000)), 431, too_large(16384),
		'10,000 fields past a 64 KiB memory');
	refused($q, head('/api/v1/resources/queues/' . ('a' x 100000)), 414, url_too_long(8192),
		'a 100 KB URL');
	refused($q, head('/health', 'X-Big: ' . ('b' x 70000)), 431, too_large(16384),
		'one 70 KB field');
	refused($q, "GET /health HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400,
		{ error => 'bad request' }, 'a field without a colon');
	my ($s) = $q->get('/health');
	is($s, 200, 'and the broker goes on serving');
};

subtest 'a request line libmicrohttpd cannot parse: 400, not a silent close' => sub {
	for my $c (["GARBAGE\r\n\r\n", 'a word alone'], ["GET\r\n\r\n", 'a method alone'],
		   ["\x01\x02\xff\xfe\r\n\r\n", 'binary bytes'],
		   [" GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 'a space before the method']) {
		refused($q, $c->[0], 400, { error => 'bad request' }, $c->[1]);
	}
	# A client that connects and goes away without a byte is not answered.
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $q->port,
		Proto => 'tcp') or die "connect: $!";
	shutdown($sock, 1);
	my $got = '';
	1 while sysread($sock, $got, 4096, length $got);
	is($got, '', 'a connection closed without a byte gets nothing');
	# Nor does a keep-alive connection after its answers, when the client closes it.
	my ($s) = $q->raw("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\n" .
		"Host: x\r\nConnection: close\r\n\r\n");
	is($s, 200, 'two requests on one connection: answered');
	($s) = $q->get('/health');
	is($s, 200, 'and the broker goes on serving');
};

subtest 'a small connection memory: every head past it still gets JSON' => sub {
	refused($small, head('/health', fields(400)), 431, too_large(4096),
		'400 header fields to a 16 KiB head');
	refused($small, head('/api/v1/resources/queues/' . ('a' x 20000)), 414, url_too_long(2048),
		'a 20 KB URL');
	my ($s) = $small->raw(head('/health', 'X-Within: ' . ('y' x 3000)));
	is($s, 200, 'a 3 KB field within the limits is served');
};

subtest 'QUEEN_CONNECTION_MEMORY_BYTES must hold heads within the limits' => sub {
	my ($st, $out) = run_queend(['--check-config'], QUEEN_CONNECTION_MEMORY_BYTES => 32768);
	isnt($st, 0, '32 KiB with the default limits: refused');
	like($out, qr/QUEEN_CONNECTION_MEMORY_BYTES: 32768 is too small/, 'naming the setting');
	($st) = run_queend(['--check-config'], QUEEN_CONNECTION_MEMORY_BYTES => 32768,
		QUEEN_MAX_URL_BYTES => 4096, QUEEN_MAX_HEADER_BYTES => 8192, QUEEN_MAX_HEADERS => 20,
		QUEEN_MAX_QUERY_PARAMS => 16);
	is($st, 0, '32 KiB with smaller limits: accepted');
};

done_testing();
