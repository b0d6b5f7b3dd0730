#!/usr/bin/perl
# Configure (SPEC 9): a full replace by default, "mode":"merge" keeps what is not sent,
# the answer is the effective row, and a bad option is a 400 that changes nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use QueenTest;

start_pg();
my $q = start_queend();

my %DEFAULTS = (leaseTime => 300, retryLimit => 3, deadLetterQueue => jtrue,
	dlqAfterMaxRetries => jtrue, dedupWindowSeconds => 3600, retentionEnabled => jfalse,
	retentionSeconds => 0, completedRetentionSeconds => 0, maxWaitTimeSeconds => 0,
	delayedProcessing => 0, windowBuffer => 0, encryptionEnabled => jfalse, priority => 0,
	maxSize => 0, ttl => 3600, retryDelay => 1000);

sub configure_ok {
	my ($body, $what) = @_;
	my ($s, $b) = $q->post_json('/api/v1/configure', $body);
	is($s, 200, "$what: 200") or diag(explain $b);
	return $b // {};
}

sub options_are {
	my ($got, $want, $what) = @_;
	is_deeply([ sort keys %{ $got // {} } ], [ sort keys %DEFAULTS ], "$what: every option key");
	is_deeply($got, { %DEFAULTS, %$want }, "$what: values");
}

subtest 'configure creates the queue and answers the effective row' => sub {
	my $b = configure_ok({ queue => 'cfg', namespace => 'billing', task => 'invoice',
		options => { leaseTime => 30, retryLimit => 5, dedupWindowSeconds => 10 } }, 'create');
	is_true($b->{configured}, 'configured true');
	ok(defined $b->{queueId} && length $b->{queueId}, 'queueId');
	is($b->{queue}, 'cfg', 'queue');
	is($b->{namespace}, 'billing', 'namespace');
	is($b->{task}, 'invoice', 'task');
	options_are($b->{options}, { leaseTime => 30, retryLimit => 5, dedupWindowSeconds => 10 },
		'answer');
	my ($s, $d) = $q->get('/api/v1/resources/queues/cfg');
	is($s, 200, 'the queue exists');
	options_are($d->{options}, { leaseTime => 30, retryLimit => 5, dedupWindowSeconds => 10 },
		'detail');
	my $e = find_queue($q, 'cfg');
	is($e->{namespace}, 'billing', 'listed with its namespace');
	is($e->{task}, 'invoice', 'and task');
};

subtest 'without mode: a full replace, every option not sent goes back to its default' => sub {
	my $b = configure_ok({ queue => 'cfg', options => { retryLimit => 7 } }, 'replace');
	options_are($b->{options}, { retryLimit => 7 }, 'leaseTime and dedupWindowSeconds reset');
	my (undef, $d) = $q->get('/api/v1/resources/queues/cfg');
	options_are($d->{options}, { retryLimit => 7 }, 'detail agrees');
};

subtest 'mode merge keeps the stored value of options not sent' => sub {
	my $b = configure_ok({ queue => 'cfg', mode => 'merge', options => { leaseTime => 45 } },
		'merge');
	options_are($b->{options}, { retryLimit => 7, leaseTime => 45 }, 'retryLimit kept');
};

subtest 'options may be given at top level' => sub {
	my $b = configure_ok({ queue => 'top', leaseTime => 20, deadLetterQueue => jfalse,
		dlqAfterMaxRetries => jfalse }, 'top-level options');
	options_are($b->{options}, { leaseTime => 20, deadLetterQueue => jfalse,
		dlqAfterMaxRetries => jfalse }, 'applied');
};

subtest 'configure keeps the messages of a queue created by a push' => sub {
	$q->push_n('pushed', 2);
	my $b = configure_ok({ queue => 'pushed', options => { retryLimit => 1 } }, 'configure');
	my ($s, $pop) = $q->pop('pushed', batch => 10);
	is_deeply(txns($pop), [qw(pushed-m-0 pushed-m-1)], 'still there');
};

subtest 'a bad option is a 400 naming it, and changes nothing' => sub {
	for my $case ([ retryLimit => 'many' ], [ leaseTime => -5 ], [ deadLetterQueue => 'yes' ],
		[ dedupWindowSeconds => -1 ], [ delayedProcessing => { x => 1 } ])
	{
		my ($name, $value) = @$case;
		my ($s, $b) = $q->post_json('/api/v1/configure',
			{ queue => 'cfg', options => { retryLimit => 9, $name => $value } });
		is($s, 400, "$name = " . to_json($value) . ': 400');
		like(to_json($b->{invalid} // ''), qr/\Q$name\E/, "invalid names $name");
		ok(defined $b->{error} && length $b->{error}, 'with an error message');
	}
	my (undef, $d) = $q->get('/api/v1/resources/queues/cfg');
	options_are($d->{options}, { retryLimit => 7, leaseTime => 45 }, 'the queue is unchanged');
	my ($s) = $q->post_json('/api/v1/configure', { queue => 'never', options => { leaseTime => -1 } });
	is($s, 400, 'a rejected configure of a new queue');
	($s) = $q->get('/api/v1/resources/queues/never');
	is($s, 404, 'does not create it');
};

subtest 'a configure without a queue name is a 400' => sub {
	my ($s, $b) = $q->post_json('/api/v1/configure', { options => { leaseTime => 10 } });
	is($s, 400, 'no queue: 400');
	($s, $b) = $q->post_json('/api/v1/configure', { queue => '', options => {} });
	is($s, 400, 'empty queue: 400');
};

done_testing;
