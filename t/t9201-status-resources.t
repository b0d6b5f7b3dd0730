#!/usr/bin/perl
# The operator views (SPEC 16): GET /api/v1/resources/queues, /overview, /namespaces, /tasks,
# /api/v1/status and /api/v1/status/queues. Shapes, and counts by offset arithmetic:
# messages retained, completed (every group with a cursor is past them), processing (under a
# live lease), pending (the rest).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

my $pg = start_pg();
my $q = start_queend(RETENTION_INTERVAL => 200);

# billing.invoice.v1: p1 offsets 0..2 (0 committed, 1 leased), p2 offsets 0..1 untouched.
$q->push_n('billing.invoice.v1', 3, partition => 'p1', prefix => 'i1');
$q->push_n('billing.invoice.v1', 2, partition => 'p2', prefix => 'i2');
my (undef, $b) = $q->pop('billing.invoice.v1', partition => 'p1', batch => 1);
$q->ack_all($b);
(undef, $b) = $q->pop('billing.invoice.v1', partition => 'p1', batch => 1);
is_deeply(offsets($b), [1], 'offset 1 of p1 is leased');
# billing.refund: offset 0 dead-lettered, offset 1 pending.
$q->push_n('billing.refund', 2, prefix => 'r');
(undef, $b) = $q->pop('billing.refund', batch => 1);
$q->ack_all($b, 'dlq');
$q->push_n('ops.audit.x', 1, prefix => 'a');
is(($q->configure('plain'))[0], 200, 'plain: configured, empty, its own namespace (SPEC 21)');

# A list of named objects as a hash by name.
sub by_name { return { map { $_->{name} => $_ } @{ $_[0] // [] } } }

subtest 'GET /api/v1/resources/queues' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/queues');
	is($s, 200, 'status 200');
	is($d->{total}, 4, 'total 4');
	is_deeply([ map { $_->{name} } @{ $d->{queues} } ],
		[qw(billing.invoice.v1 billing.refund ops.audit.x plain)], 'every queue, by name');
	my $e = by_name($d->{queues});
	my $inv = $e->{'billing.invoice.v1'};
	is($inv->{namespace}, 'billing', 'namespace');
	is($inv->{task}, 'invoice', 'task');
	is($inv->{partitions}, 2, 'partitions 2');
	is($inv->{messages}, 5, 'messages 5');
	is($inv->{completed}, 1, 'completed 1');
	is($inv->{processing}, 1, 'processing 1 (the leased offset)');
	is($inv->{pending}, 3, 'pending 3');
	is($inv->{consumerGroups}, 1, 'one group (__QUEUE_MODE__)');
	like($inv->{id}, qr/^[0-9a-f-]{36}$/, 'id');
	like($inv->{createdAt}, iso_re, 'createdAt');
	like($inv->{lastMessageAt}, iso_re, 'lastMessageAt');
	is_deeply([ @{ $e->{'billing.refund'} }{qw(messages completed processing pending)} ],
		[ 2, 1, 0, 1 ],
		'billing.refund: 2 messages, the dead-lettered one completed, 1 pending');
	is_deeply([ @{ $e->{plain} }{qw(namespace task partitions messages pending)} ],
		[ 'plain', '', 0, 0, 0 ], 'plain: namespace = the undotted name, no task, nothing in it');
	is($e->{plain}{lastMessageAt}, undef, 'plain: lastMessageAt null');
};

subtest 'GET /api/v1/resources/namespaces' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/namespaces');
	is($s, 200, 'status 200');
	is($d->{total}, 3, 'three namespaces (an undotted name is its own)');
	is_deeply($d->{namespaces}, [
		{ namespace => 'billing', queues => 2, partitions => 3, messages => 7, pending => 4,
		  processing => 1 },
		{ namespace => 'ops', queues => 1, partitions => 1, messages => 1, pending => 1,
		  processing => 0 },
		{ namespace => 'plain', queues => 1, partitions => 0, messages => 0, pending => 0,
		  processing => 0 } ], 'per namespace: queues, partitions, messages, pending')
		or diag(explain $d);
};

subtest 'GET /api/v1/resources/tasks' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/tasks');
	is($s, 200, 'status 200');
	is($d->{total}, 3, 'three (namespace, task) pairs');
	is_deeply($d->{tasks}, [
		{ namespace => 'billing', task => 'invoice', queues => 1, partitions => 2,
		  messages => 5, pending => 3, processing => 1 },
		{ namespace => 'billing', task => 'refund', queues => 1, partitions => 1,
		  messages => 2, pending => 1, processing => 0 },
		{ namespace => 'ops', task => 'audit', queues => 1, partitions => 1, messages => 1,
		  pending => 1, processing => 0 } ], 'per task') or diag(explain $d);
};

subtest 'GET /api/v1/resources/overview' => sub {
	my ($s, $d) = $q->get('/api/v1/resources/overview');
	is($s, 200, 'status 200');
	is_deeply([ @$d{qw(queues partitions namespaces tasks consumerGroups)} ], [ 4, 4, 3, 3, 1 ],
		'queues 4, partitions 4, namespaces 3, tasks 3, consumerGroups 1');
	is_deeply($d->{messages}, { total => 8, pending => 5, processing => 1, completed => 2,
		deadLetter => 1 }, 'messages') or diag(explain $d);
	is_deeply($d->{leases}, { active => 1 }, 'one live lease');
	like($d->{timestamp}, iso_re, 'timestamp');
	like($d->{lastMessageAt}, iso_re, 'lastMessageAt');
};

subtest 'GET /api/v1/status' => sub {
	ok(wait_until(sub {
		((($q->get('/api/v1/status'))[1] // {})->{retention}{rounds} // 0) > 0 }, 30, 0.1),
		'a retention round has run');
	my ($s, $d) = $q->get('/api/v1/status');
	is($s, 200, 'status 200');
	is($d->{status}, 'healthy', 'healthy');
	like($d->{version}, qr/^\d+\.\d+/, 'version');
	like($d->{uptimeSeconds}, qr/^\d+$/, 'uptimeSeconds');
	like($d->{time}, iso_re, 'time');
	my $br = $d->{broker} // {};
	is($br->{messages}{pushed}, 8, 'broker: 8 messages pushed');
	cmp_ok($br->{requests}{total}, '>', 10, 'broker: requests counted');
	is($br->{port}, $q->port, 'broker: port');
	ok($br->{dbPoolSize} > 0 && $br->{httpThreads} > 0, 'broker: pool and threads');
	ok(exists $br->{parkedPops} && exists $br->{queuedJobs},
		'broker: parked pops, queued jobs');
	my $rt = $d->{retention} // {};
	is_deeply([ @$rt{qw(intervalMs batchSize)} ], [ 200, 1000 ], 'retention: interval, batch');
	like($rt->{lastRunAt}, iso_re, 'retention: lastRunAt');
	my $db = $d->{database} // {};
	is_true($db->{connected}, 'database: connected');
	like($db->{serverVersion}, qr/^15/, 'database: serverVersion');
	cmp_ok($db->{schemaVersion}, '>=', 7, 'database: schemaVersion');
	is_deeply([ @$db{qw(queues partitions messages pending processing deadLetters activeLeases
		consumerGroups)} ], [ 4, 4, 8, 5, 1, 1, 1, 1 ], 'database: counts')
		or diag(explain $db);
	cmp_ok($db->{sizeBytes}, '>', 0, 'database: sizeBytes');
};

subtest 'GET /api/v1/status/queues' => sub {
	my ($s, $d) = $q->get('/api/v1/status/queues');
	is($s, 200, 'status 200');
	is($d->{total}, 4, 'total 4');
	is_deeply($d->{pagination}, { limit => 100, offset => 0 }, 'pagination defaults');
	like($d->{timestamp}, iso_re, 'timestamp');
	my $e = by_name($d->{queues});
	my $inv = $e->{'billing.invoice.v1'} // {};
	is_deeply([ @$inv{qw(partitions messages pending processing completed activeLeases
		deadLetters ingestedLastMinute)} ], [ 2, 5, 3, 1, 1, 1, 0, 5 ], 'invoice: counts')
		or diag(explain $inv);
	like($inv->{oldestPendingAt}, iso_re, 'oldestPendingAt');
	like($inv->{lagSeconds}, qr/^\d+$/, 'lagSeconds');
	is_false($inv->{retention}{enabled}, 'retention block');
	is($inv->{retention}{dedupWindowSeconds}, 3600, 'with the dedup window');
	is($e->{'billing.refund'}{deadLetters}, 1, 'refund: one dead letter');
	is($e->{plain}{oldestPendingAt}, undef, 'plain: nothing pending');

	(undef, $d) = $q->get('/api/v1/status/queues', { namespace => 'billing' });
	is_deeply([ map { $_->{name} } @{ $d->{queues} } ], [qw(billing.invoice.v1 billing.refund)],
		'namespace=billing');
	is($d->{total}, 2, 'total counts the filtered queues');
	(undef, $d) = $q->get('/api/v1/status/queues', { task => 'audit' });
	is_deeply([ map { $_->{name} } @{ $d->{queues} } ], ['ops.audit.x'], 'task=audit');
	(undef, $d) = $q->get('/api/v1/status/queues', { limit => 1, offset => 1 });
	is_deeply([ map { $_->{name} } @{ $d->{queues} } ], ['billing.refund'],
		'limit 1, offset 1');
	is($d->{total}, 4, 'total is every queue');
	is_deeply($d->{pagination}, { limit => 1, offset => 1 }, 'pagination echoed');
	for my $bad ({ limit => 0 }, { limit => 'x' }, { offset => -1 }) {
		my ($k) = keys %$bad;
		($s, $d) = $q->get('/api/v1/status/queues', $bad);
		is($s, 400, "$k=$bad->{$k}: 400");
		like($d->{error} // '', qr/$k/, 'the error names it');
	}
};

subtest 'the views follow the data' => sub {
	$q->push_n('billing.invoice.v1', 4, partition => 'p3', prefix => 'i3');
	my $e = find_queue($q, 'billing.invoice.v1');
	is_deeply([ @$e{qw(partitions messages pending)} ], [ 3, 9, 7 ], 'a new partition counts');
	my (undef, $r) = $q->del('/api/v1/resources/queues/ops.audit.x');
	my (undef, $d) = $q->get('/api/v1/resources/namespaces');
	is_deeply([ map { $_->{namespace} } @{ $d->{namespaces} } ], ['billing', 'plain'],
		'a deleted queue\'s namespace goes');
};

subtest 'PostgreSQL down: status answers degraded, the resource views 503' => sub {
	$pg->stop;
	my ($s, $d) = $q->get('/api/v1/status');
	is($s, 200, '/api/v1/status still answers');
	is($d->{status}, 'degraded', 'degraded');
	is_false($d->{database}{connected}, 'database: connected false');
	is($d->{broker}{messages}{pushed}, 12, 'the broker half is there');
	($s) = $q->get('/api/v1/resources/queues');
	is($s, 503, '/api/v1/resources/queues: 503');
};

done_testing();
