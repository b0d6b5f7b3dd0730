package QueenLoad;
# The load generator of the fault tests (t64xx-fault-*): producers that push and consumers that
# pop and ack, each a forked process recording every answer it gets, so that a test can say,
# after whatever it did to the broker or the database, which items were acknowledged, which
# were delivered, how long the slowest request took and when service came back. Core Perl
# modules only.
#
#   my $load = QueenLoad->start($broker, queue => 'fq', producers => 3, consumers => 2);
#   ... kill, restart, fail over ...
#   $load->stop_producers;
#   my $r = $load->finish($broker, $pg);   # drains, stops consumers, counts
#   # $r->{acked}, {delivered}, {lost}, {dup_txn}, {dup_plain}, ...
#
# Items: payload {"k":KEY}, KEY = "t<producer>-<n>" (with transactionId KEY) or "n<producer>-<n>"
# (without one); the producers alternate unless txn => 'all' or 'none'. A push answered with
# anything but 201 (refused, connection lost, 5xx) is retried with the same items until it is
# answered; an item without a transactionId retried after its first attempt reached the broker
# may then be stored twice: the items "in flight" of the report.
#
# Records, one line each, in $dir/<role><i>.log (times in seconds, Time::HiRes):
#   A t0 t1 KEY status message_id       an item's answer in a 201 (t0 sent, t1 answered)
#   E t0 t1 status                      a push answered otherwise (retried)
#   P t0 t1 status n                    a pop and how many messages it delivered
#   H t0 t1 status                      a GET /health
#   D t1 KEY message_id                 a message popped (at t1) and acknowledged
#   U t1 KEY message_id                 a message popped whose ack failed (it was delivered;
#                                       if the ack did not commit, its lease expires and it
#                                       comes back)
use strict;
use warnings;
use HTTP::Tiny;
use IO::Handle;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time sleep);

my $JSON = JSON::PP->new->canonical;
my $SEQ = 0;

# Starts the load on $broker (a QueenTest::Broker, or anything with ->url). Options:
#   queue (fq), partitions (4), producers (2), consumers (1), batch (items a push, 1),
#   rate (pushes a second per producer, 0 = as fast as answers come), txn (mixed|all|none),
#   group (consumer group, 'g'), pop_batch (100), url (overrides $broker->url), health (1: one
#   more process polls /health every 50 ms).
sub start {
	my ($class, $broker, %o) = @_;
	my $self = bless {
		queue => 'fq', partitions => 4, producers => 2, consumers => 1, batch => 1, rate => 0,
		txn => 'mixed', group => 'g', pop_batch => 100, %o,
		url => $o{url} // $broker->url,
	}, $class;
	$self->{dir} = QueenTest::tmpdir() . '/load' . ++$SEQ;
	mkdir $self->{dir} or die "mkdir $self->{dir}: $!";
	$self->{stop_p} = "$self->{dir}/stop-producers";
	$self->{stop_c} = "$self->{dir}/stop-consumers";
	$self->{url_file} = "$self->{dir}/url";
	$self->set_url($self->{url});
	for my $i (1 .. $self->{producers}) {
		push @{ $self->{pids} }, $self->_fork("p$i", sub { $self->_producer($i, @_) });
	}
	for my $i (1 .. $self->{consumers}) {
		push @{ $self->{pids} }, $self->_fork("c$i", sub { $self->_consumer($i, @_) });
	}
	push @{ $self->{pids} }, $self->_fork('h', sub { $self->_health(@_) }) if $self->{health};
	$self->{started} = time;
	return $self;
}

# Points every client at another broker (after a restart on a new port).
sub set_url {
	my ($self, $url) = @_;
	$self->{url} = $url;
	open my $fh, '>', "$self->{url_file}.tmp" or die "url: $!";
	print {$fh} $url;
	close $fh;
	rename "$self->{url_file}.tmp", $self->{url_file} or die "rename: $!";
}

sub _fork {
	my ($self, $name, $code) = @_;
	my $pid = fork // die "fork: $!";
	return $pid if $pid;
	$SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
	open my $log, '>', "$self->{dir}/$name.log" or POSIX::_exit(1);
	$log->autoflush(1);
	eval { $code->($log) };
	print {$log} "X $@" if $@;
	close $log;
	POSIX::_exit(0);
}

sub _url {
	my $self = shift;
	if (time - ($self->{url_read} // 0) > 0.1) {
		open my $fh, '<', $self->{url_file} or return $self->{url};
		my $u = <$fh>;
		close $fh;
		$self->{url} = $u if $u;
		$self->{url_read} = time;
	}
	return $self->{url};
}

sub _ua { HTTP::Tiny->new(timeout => 60, keep_alive => 1, agent => 'queen-load/1') }

sub _producer {
	my ($self, $p, $log) = @_;
	my $ua = _ua();
	my $n = 0;
	my $gap = $self->{rate} ? 1 / $self->{rate} : 0;
	my $next = time;
	while (!-e $self->{stop_p}) {
		my @items;
		for (1 .. $self->{batch}) {
			my $t = $self->{txn} eq 'all' ? 1 : $self->{txn} eq 'none' ? 0 : $n % 2 == 0;
			my $key = ($t ? 't' : 'n') . "$p-$n";
			push @items, { queue => $self->{queue}, partition => 'p' . ($n % $self->{partitions}),
				payload => { k => $key }, ($t ? (transactionId => $key) : ()) };
			$n++;
		}
		my $body = $JSON->encode({ items => \@items });
		while (1) {
			my $t0 = time;
			my $r = $ua->request('POST', $self->_url . '/api/v1/push',
				{ content => $body, headers => { 'content-type' => 'application/json' } });
			my $t1 = time;
			my $a = $r->{status} == 201 ? eval { $JSON->decode($r->{content}) } : undef;
			if (ref $a eq 'ARRAY' && @$a == @items) {
				printf {$log} "A %.4f %.4f %s %s %s\n", $t0, $t1, $items[$_]{payload}{k},
					$a->[$_]{status}, $a->[$_]{message_id} // '-' for 0 .. $#items;
				last;
			}
			printf {$log} "E %.4f %.4f %s\n", $t0, $t1, $r->{status};
			last if -e $self->{stop_p};
			sleep 0.02;
		}
		if ($gap) {
			$next += $gap;
			my $d = $next - time;
			sleep $d if $d > 0;
			$next = time if $d < -1;	# fell behind by more than a second: no burst
		}
	}
}

sub _pop_ack {
	my ($self, $ua, $log, $timeout) = @_;
	my $q = $self->{queue};
	my $t0 = time;
	my $r = $ua->request('GET', $self->_url . "/api/v1/pop/queue/$q?consumerGroup=$self->{group}" .
		"&batch=$self->{pop_batch}&wait=true&timeout=$timeout&subscriptionMode=all");
	my $t1 = time;
	my $b = $r->{status} == 200 ? eval { $JSON->decode($r->{content}) } : undef;
	my @m = ref $b eq 'HASH' ? @{ $b->{messages} // [] } : ();
	printf {$log} "P %.4f %.4f %s %d\n", $t0, $t1, $r->{status}, scalar @m;
	return $r->{status} unless @m;
	my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
		leaseId => $_->{leaseId}, status => 'completed' } } @m;
	my $ar = $ua->request('POST', $self->_url . '/api/v1/ack/batch', { content =>
		$JSON->encode({ consumerGroup => $self->{group}, acknowledgments => \@acks }),
		headers => { 'content-type' => 'application/json' } });
	my $ab = $ar->{status} == 200 ? eval { $JSON->decode($ar->{content}) } : undef;
	my $t2 = time;
	# D: popped and acknowledged; U: popped, the ack's outcome unknown (lost with the broker
	# or the database).
	for my $i (0 .. $#m) {
		my $ok = ref $ab eq 'ARRAY' && $ab->[$i] && $ab->[$i]{success};
		printf {$log} "%s %.4f %s %s\n", $ok ? 'D' : 'U', $t1,
			(ref $m[$i]{data} eq 'HASH' ? $m[$i]{data}{k} : '?'), $m[$i]{id} // '-';
	}
	return 200;
}

sub _consumer {
	my ($self, $c, $log) = @_;
	my $ua = _ua();
	while (!-e $self->{stop_c}) {
		my $s = $self->_pop_ack($ua, $log, 500);
		sleep 0.05 if $s != 200 && $s != 204;
	}
}

sub _health {
	my ($self, $log) = @_;
	my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => 0);
	while (!-e $self->{stop_c}) {
		my $t0 = time;
		my $r = $ua->get($self->_url . '/health');
		printf {$log} "H %.4f %.4f %s\n", $t0, time, $r->{status};
		sleep 0.05;
	}
}

sub _wait_children {
	my ($self, $pids, $timeout) = @_;
	my $deadline = time + $timeout;
	for my $pid (@$pids) {
		while (waitpid($pid, POSIX::WNOHANG()) == 0) {
			if (time > $deadline) {
				kill 'KILL', $pid;
				waitpid($pid, 0);
				last;
			}
			sleep 0.02;
		}
	}
}

sub _touch { open my $fh, ">", $_[0] or die "$_[0]: $!"; close $fh }

sub stop_producers {
	my $self = shift;
	return if $self->{producers_stopped};
	_touch($self->{stop_p});
	$self->_wait_children([ @{ $self->{pids} }[0 .. $self->{producers} - 1] ], 70);
	$self->{producers_stopped} = time;
}

sub stop {
	my $self = shift;
	$self->stop_producers;
	_touch($self->{stop_c});
	$self->_wait_children($self->{pids}, 10);
}

# Reads every record of the run.
sub records {
	my $self = shift;
	my (%r, @a, @e, @p, %d);
	for my $f (glob "$self->{dir}/*.log") {
		open my $fh, '<', $f or next;
		while (<$fh>) {
			next unless s/\n\z//;	# a line still being written
			my @f = split / /;
			if ($f[0] eq 'A') { push @a, [ @f[1 .. 5] ] }
			elsif ($f[0] eq 'E') { push @e, [ @f[1 .. 3] ] }
			elsif ($f[0] eq 'P') { push @p, [ @f[1 .. 4] ] }
			elsif ($f[0] eq 'D') { $d{ $f[2] } //= $f[1]; $r{redelivered}++ if $r{seen}{ $f[2] }++ }
			elsif ($f[0] eq 'U') { $r{unacked}++; $d{ $f[2] } //= $f[1] }
			elsif ($f[0] eq 'H') { push @{ $r{health} }, [ @f[1 .. 3] ] }
			elsif ($f[0] eq 'X') { push @{ $r{died} }, $_ }
		}
		close $fh;
	}
	@r{qw(answers errors pops delivered)} = (\@a, \@e, \@p, \%d);
	return \%r;
}

# Stops the producers, then consumes until every acknowledged item was delivered (or
# $timeout seconds pass), stops the consumers and counts. With $pg, also counts what is
# stored twice (by key, in the segments). Returns a hash:
#   acked (items answered queued or buffered), buffered, delivered, lost, lost_keys (a few),
#   dup_txn / dup_plain (stored more than once, with / without a transactionId), errors
#   (pushes answered otherwise, retried), longest (slowest push, s), redelivered.
sub finish {
	my ($self, $pg, $timeout) = @_;
	$self->stop_producers;
	my $rec = $self->records;
	my %acked;
	for (@{ $rec->{answers} }) {
		$acked{ $_->[2] } = 1 if $_->[3] eq 'queued' || $_->[3] eq 'buffered';
	}
	my $deadline = time + ($timeout // 30);
	while (time < $deadline) {
		my $d = $self->records->{delivered};
		last unless grep { !$d->{$_} } keys %acked;
		sleep 0.2;
	}
	$self->stop;
	$rec = $self->records;
	my @lost = grep { !$rec->{delivered}{$_} } sort keys %acked;
	my %r = (acked => scalar keys %acked, delivered => scalar keys %{ $rec->{delivered} },
		lost => scalar @lost, lost_keys => [ @lost[0 .. ($#lost < 4 ? $#lost : 4)] ],
		errors => scalar @{ $rec->{errors} }, redelivered => $rec->{redelivered} // 0,
		unacked => $rec->{unacked} // 0,
		buffered => scalar(grep { $_->[3] eq 'buffered' } @{ $rec->{answers} }),
		died => $rec->{died} // [], rec => $rec);
	my $longest = 0;
	for (@{ $rec->{answers} }, @{ $rec->{errors} }) {
		$longest = $_->[1] - $_->[0] if $_->[1] - $_->[0] > $longest;
	}
	$r{longest} = $longest;
	if ($pg) {
		my $q = $self->{queue};
		my $out = $pg->psql("SELECT substr(k, 1, 1), count(*) FROM (SELECT (p::json)->>'k' AS k " .
			"FROM queen_segments s JOIN queen_partitions pa ON pa.id = s.partition_id " .
			"JOIN queen_queues q ON q.id = pa.queue_id, unnest(s.payloads) p " .
			"WHERE q.name = '$q') x GROUP BY k HAVING count(*) > 1");
		my %dup = (t => 0, n => 0);
		for (split /\n/, $out) {
			my ($kind, $n) = split /\|/;
			$dup{$kind} += $n - 1 if defined $n;
		}
		@r{qw(dup_txn dup_plain)} = ($dup{t}, $dup{n});
	}
	return \%r;
}

# Items stored out of their producer's order within a partition (each producer pushes one
# request at a time, so its items of one partition must keep their order there), read from
# the segments in offset order.
sub order_violations {
	my ($self, $pg) = @_;
	my $out = $pg->psql("SELECT pa.name, (x.p::json)->>'k' FROM queen_segments s " .
		"JOIN queen_partitions pa ON pa.id = s.partition_id JOIN queen_queues q " .
		"ON q.id = pa.queue_id, unnest(s.payloads) WITH ORDINALITY AS x (p, o) " .
		"WHERE q.name = '$self->{queue}' ORDER BY pa.name, s.base_offset, x.o");
	my (%last, $bad);
	for (split /\n/, $out) {
		my ($part, $k) = split /\|/;
		my ($prod, $n) = ($k // '') =~ /^[tn](\d+)-(\d+)$/ or next;
		$bad++ if defined $last{$part}{$prod} && $n < $last{$part}{$prod};
		$last{$part}{$prod} = $n;
	}
	return $bad // 0;
}

# The longest push (answered or not) that was under way at some time in [$from, $to].
sub longest_between {
	my ($self, $rec, $from, $to) = @_;
	my $m = 0;
	for (@{ $rec->{answers} }, @{ $rec->{errors} }) {
		next if $_->[1] < $from || $_->[0] > $to;
		$m = $_->[1] - $_->[0] if $_->[1] - $_->[0] > $m;
	}
	return $m;
}

# Seconds from $t to the first push answered "queued" that was sent after $t, and to the first
# pop after $t that delivered something; undef when none.
sub recovery {
	my ($self, $rec, $t) = @_;
	my ($q, $p);
	for (@{ $rec->{answers} }) {
		$q = $_->[1] if $_->[3] eq 'queued' && $_->[0] >= $t && (!defined $q || $_->[1] < $q);
	}
	for (@{ $rec->{pops} }) {
		$p = $_->[1] if $_->[2] == 200 && $_->[3] > 0 && $_->[0] >= $t && (!defined $p || $_->[1] < $p);
	}
	return (defined $q ? $q - $t : undef, defined $p ? $p - $t : undef);
}

# Delivery delays (delivered minus sent) of the items sent in [$from, $to], sorted.
sub delays {
	my ($self, $rec, $from, $to) = @_;
	my @d;
	for (@{ $rec->{answers} }) {
		next if $_->[0] < $from || $_->[0] > $to;
		my $at = $rec->{delivered}{ $_->[2] };
		push @d, $at - $_->[0] if defined $at;
	}
	return [ sort { $a <=> $b } @d ];
}

sub pct {
	my ($sorted, $p) = @_;
	return undef unless @$sorted;
	return $sorted->[int($p * $#$sorted + 0.5)];
}

# The /health answers in time order, runs of the same status merged: [[t0, status], ...].
sub health_runs {
	my ($self, $rec) = @_;
	my @runs;
	for (sort { $a->[0] <=> $b->[0] } @{ $rec->{health} // [] }) {
		push @runs, [ $_->[0], $_->[2] ] unless @runs && $runs[-1][1] eq $_->[2];
	}
	return \@runs;
}

# One TAP diagnostic line of the figures.
sub figures {
	my ($self, $name, $r, %more) = @_;
	my %f = (acked => $r->{acked}, buffered => $r->{buffered}, delivered => $r->{delivered},
		lost => $r->{lost}, dup_txn => $r->{dup_txn} // '?', dup_plain => $r->{dup_plain} // '?',
		retried_pushes => $r->{errors}, redelivered => $r->{redelivered},
		ack_failed => $r->{unacked},
		longest_push_s => sprintf('%.3f', $r->{longest}), %more);
	Test::More::diag("$name: " . join(' ', map { "$_=$f{$_}" } sort keys %f));
}

1;
