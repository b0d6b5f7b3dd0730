package QueenAuth;

# Keys and tokens for the authentication tests: keys are generated with the openssl command
# line into the test's temp dir, tokens are signed here (HMAC with Digest::SHA, the others with
# openssl), and a JWKS can be served by a tiny HTTP server in a child process. Core Perl only.
#
#   my $k = QueenAuth::keys($dir);                   # rsa, ec, ed: {priv, pub, jwk}
#   my $t = QueenAuth::token('RS256', $k->{rsa}{priv}, { sub => 'svc', role => 'admin' });
#   my $t = QueenAuth::token('HS256', 'secret', {...}, kid => 'k1');
#   my $srv = QueenAuth::serve_jwks($dir);          # serves $dir/jwks.json; $srv->{url}

use strict;
use warnings;
use Digest::SHA qw(hmac_sha256 hmac_sha384 hmac_sha512);
use IO::Socket::INET;
use JSON::PP ();
use MIME::Base64 qw(encode_base64);
use POSIX ();

my $JSON = JSON::PP->new->canonical;

sub b64url {
	my $s = encode_base64($_[0], '');
	$s =~ tr{+/}{-_};
	$s =~ s/=+$//;
	return $s;
}

sub have_openssl { return system('openssl version >/dev/null 2>&1') == 0 }

sub _run {
	my @cmd = @_;
	system(@cmd) == 0 or die "@cmd failed\n";
}

sub _slurp {
	open my $fh, '<:raw', $_[0] or die "$_[0]: $!";
	local $/;
	return scalar <$fh>;
}

sub _spew {
	my ($path, $data) = @_;
	open my $fh, '>:raw', $path or die "$path: $!";
	print {$fh} $data;
	close $fh;
}

# Generates one key of each public kind under $dir; returns {rsa, ec, ed} each with
# priv (path), pub (path), pem (public PEM text) and jwk (hash, no kid).
sub keys {
	my ($dir, $tag) = @_;
	$tag //= 'k';
	my %k;
	_run('openssl', 'genpkey', '-quiet', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048',
		'-out', "$dir/$tag-rsa.pem");
	_run('openssl', 'genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256',
		'-out', "$dir/$tag-ec.pem");
	_run('openssl', 'genpkey', '-algorithm', 'ED25519', '-out', "$dir/$tag-ed.pem");
	for my $kind (qw(rsa ec ed)) {
		my $priv = "$dir/$tag-$kind.pem";
		_run('openssl', 'pkey', '-in', $priv, '-pubout', '-out', "$dir/$tag-$kind.pub");
		_run('openssl', 'pkey', '-in', $priv, '-pubout', '-outform', 'DER', '-out',
			"$dir/$tag-$kind.der");
		my $der = _slurp("$dir/$tag-$kind.der");
		my $jwk;
		if ($kind eq 'rsa') {
			my $mod = `openssl pkey -in '$priv' -pubout 2>/dev/null | openssl rsa -pubin -noout -modulus 2>/dev/null`;
			$mod =~ s/^Modulus=//;
			$mod =~ s/\s+//g;
			$jwk = { kty => 'RSA', n => b64url(pack('H*', $mod)), e => 'AQAB' };
		} elsif ($kind eq 'ec') {
			my $pt = substr($der, -65);
			$jwk = { kty => 'EC', crv => 'P-256', x => b64url(substr($pt, 1, 32)),
				y => b64url(substr($pt, 33, 32)) };
		} else {
			$jwk = { kty => 'OKP', crv => 'Ed25519', x => b64url(substr($der, -32)) };
		}
		$k{$kind} = { priv => $priv, pub => "$dir/$tag-$kind.pub",
			pem => _slurp("$dir/$tag-$kind.pub"), jwk => $jwk };
	}
	return \%k;
}

# ECDSA DER signature -> r || s, 32 bytes each (JWS form).
sub _der_to_raw {
	my $der = shift;
	my @b = unpack('C*', $der);
	my $i = 2;
	$i++ if $b[1] & 0x80;
	my @parts;
	for (1 .. 2) {
		die "bad DER\n" unless $b[$i] == 0x02;
		my $len = $b[$i + 1];
		my $v = pack('C*', @b[$i + 2 .. $i + 1 + $len]);
		$v =~ s/^\x00+//;
		push @parts, ("\x00" x (32 - length $v)) . $v;
		$i += 2 + $len;
	}
	return join '', @parts;
}

# A signed token. $key: the secret (HS*) or the private key path; %o: kid, header => {...}
# (extra header fields), sig => raw signature override.
sub token {
	my ($alg, $key, $claims, %o) = @_;
	my $hdr = { alg => $alg, typ => 'JWT', %{ $o{header} // {} } };
	$hdr->{kid} = $o{kid} if defined $o{kid};
	my $input = b64url($JSON->encode($hdr)) . '.' .
		b64url(ref $claims ? $JSON->encode($claims) : $claims);
	my $sig;
	if ($alg =~ /^HS(\d+)$/) {
		$sig = $1 == 256 ? hmac_sha256($input, $key) : $1 == 384 ? hmac_sha384($input, $key)
			: hmac_sha512($input, $key);
	} elsif ($alg =~ /^(RS|ES)(\d+)$/) {
		my $tmp = "$key.in";
		_spew($tmp, $input);
		$sig = `openssl dgst -sha$2 -sign '$key' '$tmp'`;
		$sig = _der_to_raw($sig) if $1 eq 'ES';
	} elsif ($alg eq 'EdDSA') {
		my $tmp = "$key.in";
		_spew($tmp, $input);
		$sig = `openssl pkeyutl -sign -inkey '$key' -rawin -in '$tmp'`;
	} else {
		$sig = '';
	}
	$sig = $o{sig} if exists $o{sig};
	return $input . '.' . b64url($sig);
}

sub jwks_json {
	my @keys = @_;
	return $JSON->encode({ keys => \@keys });
}

# A one-connection-at-a-time HTTP server in a child process answering every GET with the
# current content of $file (read at each request, so a test can rotate it) and counting
# requests in $file.hits. Returns {url, pid}; stop with stop_server.
sub serve_jwks {
	my ($file, %o) = @_;
	my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16,
		Proto => 'tcp', ReuseAddr => 1) or die "listen: $!";
	my $port = $srv->sockport;
	my $pid = fork // die "fork: $!";
	if (!$pid) {
		$SIG{TERM} = sub { POSIX::_exit(0) };
		while (my $c = $srv->accept) {
			my $req = '';
			while ($req !~ /\r\n\r\n/) {
				my $n = sysread($c, $req, 4096, length $req);
				last unless $n;
			}
			my $hits = -e "$file.hits" ? _slurp("$file.hits") : 0;
			_spew("$file.hits", $hits + 1);
			sleep $o{delay} if $o{delay} && $hits + 1 > ($o{delay_after} // 0);
			my $body = -e $file ? _slurp($file) : '';
			my $status = -e $file ? '200 OK' : '404 Not Found';
			print {$c} "HTTP/1.1 $status\r\nContent-Type: application/json\r\n" .
				"Content-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
			close $c;
		}
		POSIX::_exit(0);
	}
	close $srv;
	return { url => "http://127.0.0.1:$port/jwks.json", pid => $pid, port => $port };
}

sub hits { my $f = shift; return -e "$f.hits" ? _slurp("$f.hits") + 0 : 0 }

sub stop_server {
	my $s = shift or return;
	kill 'TERM', $s->{pid};
	waitpid($s->{pid}, 0);
}

sub write_file { _spew(@_) }

1;
