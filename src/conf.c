/* conf: the settings table and its overlays (defaults < file < environment < flags).
 *
 * Every setting is one row of conf_table; nothing else in the broker knows names, defaults or
 * ranges. Values are parsed and range-checked while loading, so a bad value is a start-up
 * error that names the setting, never a surprise later. */
#include "conf.h"
#include "log.h"
#include "qassert.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct conf qconf;

enum conf_type { CT_STR, CT_INT, CT_BOOL, CT_ENUM };

struct conf_def {
	const char *name;	/* environment name; file key; flag is derived */
	const char *alias;	/* accepted alternative environment name */
	enum conf_type type;
	size_t off;
	const char *def;
	int64_t min, max;
	const char *choices;	/* CT_ENUM: '|'-separated */
	int reload;		/* 1: SIGHUP applies it; 0: needs a restart */
	int secret;
	const char *help;
};

#define F(field) offsetof(struct conf, field)

static const struct conf_def conf_table[] = {
	{ "HOST", NULL, CT_STR, F(host), "0.0.0.0", 0, 0, NULL, 0, 0,
	  "address the HTTP server listens on" },
	{ "PORT", NULL, CT_INT, F(port), "6632", 1, 65535, NULL, 0, 0,
	  "TCP port the HTTP server listens on" },
	{ "PG_HOST", NULL, CT_STR, F(pg_host), "localhost", 0, 0, NULL, 0, 0,
	  "PostgreSQL host (or comma list of hosts: the read-write one is used)" },
	{ "PG_PORT", NULL, CT_STR, F(pg_port), "5432", 0, 0, NULL, 0, 0,
	  "PostgreSQL port, or a comma list of one port per host" },
	{ "PG_USER", NULL, CT_STR, F(pg_user), "postgres", 0, 0, NULL, 0, 0,
	  "PostgreSQL user" },
	{ "PG_PASSWORD", NULL, CT_STR, F(pg_password), "postgres", 0, 0, NULL, 0, 1,
	  "PostgreSQL password" },
	{ "PG_DB", "PG_DATABASE", CT_STR, F(pg_db), "postgres", 0, 0, NULL, 0, 0,
	  "PostgreSQL database" },
	{ "PG_USE_SSL", NULL, CT_BOOL, F(pg_use_ssl), "false", 0, 0, NULL, 0, 0,
	  "require TLS to PostgreSQL (sslmode=require)" },
	{ "DB_POOL_SIZE", NULL, CT_INT, F(db_pool_size), "16", 1, 1000, NULL, 0, 0,
	  "worker threads, each holding one PostgreSQL connection" },
	{ "NUM_WORKERS", NULL, CT_INT, F(num_workers), "0", 0, 1024, NULL, 0, 0,
	  "HTTP threads (0 = number of CPUs)" },
	{ "QUEEN_MAX_BODY_BYTES", NULL, CT_INT, F(max_body_bytes), "67108864", 1024,
	  INT64_C(1) << 40, NULL, 0, 0, "largest request body accepted (larger: 413)" },
	{ "QUEEN_STMT_TIMEOUT_MS", NULL, CT_INT, F(stmt_timeout_ms), "30000", 0, 86400000, NULL,
	  0, 0, "statement_timeout of every PostgreSQL connection, ms (0 = none)" },
	{ "DEFAULT_TIMEOUT", NULL, CT_INT, F(default_timeout), "30000", 0, 3600000, NULL, 1, 0,
	  "long-poll deadline when a pop sends no timeout, ms" },
	{ "DEFAULT_SUBSCRIPTION_MODE", NULL, CT_ENUM, F(default_subscription_mode), "new", 0, 0,
	  "new|all|new-only", 1, 0, "where a new consumer group starts when the pop says nothing" },
	{ "QUEEN_POP_AUTOPILOT", NULL, CT_BOOL, F(pop_autopilot), "on", 0, 0, NULL, 1, 0,
	  "honour autopilot=true on pops" },
	{ "QUEEN_POP_AUTOPILOT_BATCH", NULL, CT_INT, F(pop_autopilot_batch), "100", 1, 10000,
	  NULL, 1, 0, "batch chosen by pop autopilot" },
	{ "RETENTION_INTERVAL", NULL, CT_INT, F(retention_interval), "5000", 100, 86400000, NULL,
	  1, 0, "interval between maintenance rounds, ms" },
	{ "RETENTION_BATCH_SIZE", NULL, CT_INT, F(retention_batch_size), "1000", 1, 1000000,
	  NULL, 1, 0, "most segments a maintenance round deletes" },
	{ "FILE_BUFFER_DIR", NULL, CT_STR, F(file_buffer_dir), "/var/lib/queen/buffers", 0, 0,
	  NULL, 0, 0, "directory of the push spool" },
	{ "QUEEN_ENCRYPTION_KEY", NULL, CT_STR, F(encryption_key), "", 0, 0, NULL, 0, 1,
	  "payload encryption key (AES-256-GCM), 64 hex characters" },
	{ "QUEEN_ENCRYPTION_KEY_PREVIOUS", NULL, CT_STR, F(encryption_key_previous), "", 0, 0,
	  NULL, 0, 1, "comma list of former encryption keys, tried on reads" },
	{ "QUEEN_PROTECTED_MODE", NULL, CT_BOOL, F(protected_mode), "on", 0, 0, NULL, 0, 0,
	  "without JWT on a non-loopback address, refuse non-loopback peers (403)" },
	{ "JWT_ENABLED", NULL, CT_BOOL, F(jwt_enabled), "false", 0, 0, NULL, 0, 0,
	  "require a bearer token (JWT) outside JWT_SKIP_PATHS" },
	{ "JWT_ALGORITHM", NULL, CT_ENUM, F(jwt_algorithm), "HS256", 0, 0,
	  "HS256|HS384|HS512|RS256|RS384|RS512|ES256|EdDSA|auto", 1, 0,
	  "token signature algorithm (auto: the token's, among those with keys)" },
	{ "JWT_SECRET", NULL, CT_STR, F(jwt_secret), "", 0, 0, NULL, 1, 1,
	  "HMAC secret of HS256/384/512 tokens" },
	{ "JWT_PUBLIC_KEY", NULL, CT_STR, F(jwt_public_key), "", 0, 0, NULL, 1, 0,
	  "PEM public key of RS*/ES256/EdDSA tokens, or @/path/to/key.pem" },
	{ "JWT_JWKS_URL", NULL, CT_STR, F(jwt_jwks_url), "", 0, 0, NULL, 0, 0,
	  "URL of a JWKS, fetched at start and refreshed" },
	{ "JWT_JWKS_FILE", NULL, CT_STR, F(jwt_jwks_file), "", 0, 0, NULL, 1, 0,
	  "path of a JWKS file, re-read on SIGHUP" },
	{ "JWT_JWKS_REFRESH_INTERVAL", NULL, CT_INT, F(jwt_jwks_refresh_interval), "3600", 1,
	  604800, NULL, 0, 0, "seconds between fetches of JWT_JWKS_URL" },
	{ "JWT_JWKS_TIMEOUT_MS", NULL, CT_INT, F(jwt_jwks_timeout_ms), "5000", 100, 600000, NULL,
	  0, 0, "fetch timeout of JWT_JWKS_URL, ms; longest a token with an unknown kid waits" },
	{ "JWT_SKIP_PATHS", NULL, CT_STR, F(jwt_skip_paths), "/health,/metrics/prometheus,/metrics,/",
	  0, 0, NULL, 1, 0, "comma list of paths served without a token (exact matches)" },
	{ "JWT_CLOCK_SKEW", NULL, CT_INT, F(jwt_clock_skew), "30", 0, 86400, NULL, 1, 0,
	  "seconds of clock skew allowed on exp, nbf and iat" },
	{ "JWT_ISSUER", NULL, CT_STR, F(jwt_issuer), "", 0, 0, NULL, 1, 0,
	  "required iss claim (empty: not checked)" },
	{ "JWT_AUDIENCE", NULL, CT_STR, F(jwt_audience), "", 0, 0, NULL, 1, 0,
	  "required aud claim, a string or one element of an array (empty: not checked)" },
	{ "JWT_ROLES_CLAIM", NULL, CT_STR, F(jwt_roles_claim), "role", 0, 0, NULL, 1, 0,
	  "claim holding the role as a string" },
	{ "JWT_ROLES_ARRAY_CLAIM", NULL, CT_STR, F(jwt_roles_array_claim), "roles", 0, 0, NULL, 1,
	  0, "claim holding the roles as an array" },
	{ "JWT_ROLE_ADMIN", NULL, CT_STR, F(jwt_role_admin), "admin", 0, 0, NULL, 1, 0,
	  "role name of the admin level" },
	{ "JWT_ROLE_READ_WRITE", NULL, CT_STR, F(jwt_role_read_write), "read-write", 0, 0, NULL, 1,
	  0, "role name of the read-write level" },
	{ "JWT_ROLE_READ_ONLY", NULL, CT_STR, F(jwt_role_read_only), "read-only", 0, 0, NULL, 1, 0,
	  "role name of the read-only level" },
	{ "JWT_ROLE_WRITE_ONLY", NULL, CT_STR, F(jwt_role_write_only), "write-only", 0, 0, NULL, 1,
	  0, "role name of the write-only level" },
	{ "LOG_LEVEL", NULL, CT_ENUM, F(log_level), "info", 0, 0, "error|warn|info|debug", 1, 0,
	  "least severe level logged" },
	{ "QUEEN_MAX_QUEUED_JOBS", NULL, CT_INT, F(max_queued_jobs), "10000", 1, 10000000, NULL,
	  0, 0, "jobs waiting for a worker before requests get 429" },
	{ "QUEEN_GROUP_COMMIT_ITEMS", NULL, CT_INT, F(group_commit_items), "2000", 1, 100000,
	  NULL, 1, 0, "most push items coalesced into one transaction" },
	{ "QUEEN_PUSH_LANES", NULL, CT_INT, F(push_lanes), "2", 1, 64, NULL, 1, 0,
	  "push batches running at once (waiting pushes join the next one), the shards "
	  "by partition each batch is stored in at once, and the connections a spool "
	  "replay uses at once" },
	{ "QUEEN_BULK_NICE", NULL, CT_INT, F(bulk_nice), "10", 0, 19, NULL, 0, 0,
	  "nice value of the threads that parse large bodies and store pushes too large to "
	  "share a group commit (0: the workers do it at their own priority)" },
	{ "QUEEN_INDEX_RESYNC_MS", NULL, CT_INT, F(index_resync_ms), "10000", 100, 86400000,
	  NULL, 1, 0, "interval of the partition index resync from PostgreSQL, ms" },
	{ "QUEEN_MAX_PUSH_ITEMS", NULL, CT_INT, F(max_push_items), "10000", 1, 10000000, NULL, 1,
	  0, "most items in one push (more: 413)" },
	{ "QUEEN_MAX_INFLIGHT_BYTES", NULL, CT_INT, F(max_inflight_bytes), "268435456", 1024,
	  INT64_C(1) << 40, NULL, 1, 0,
	  "request bodies held in memory by all requests together (more: 429)" },
	{ "QUEEN_MAX_NAME_BYTES", NULL, CT_INT, F(max_name_bytes), "255", 1, 255, NULL, 1, 0,
	  "longest queue, partition, group, namespace or task name, bytes (longer: 400)" },
	{ "QUEEN_MAX_LONGPOLLS", NULL, CT_INT, F(max_longpolls), "10000", 0, 1000000, NULL, 1, 0,
	  "parked long-polls held at once (more: 429)" },
	{ "QUEEN_MAX_URL_BYTES", NULL, CT_INT, F(max_url_bytes), "8192", 256, 1048576, NULL, 0, 0,
	  "longest request URL (path and query string), bytes (longer: 414)" },
	{ "QUEEN_MAX_HEADER_BYTES", NULL, CT_INT, F(max_header_bytes), "16384", 1024, 1048576,
	  NULL, 0, 0, "request header fields together, bytes (more: 431)" },
	{ "QUEEN_MAX_HEADERS", NULL, CT_INT, F(max_headers), "100", 8, 100000, NULL, 0, 0,
	  "most request header fields (more: 431)" },
	{ "QUEEN_MAX_QUERY_PARAMS", NULL, CT_INT, F(max_query_params), "64", 8, 100000, NULL, 0,
	  0, "most query string parameters in one request (more: 414)" },
	{ "QUEEN_CONNECTION_MEMORY_BYTES", NULL, CT_INT, F(connection_memory_bytes), "65536",
	  4096, 67108864, NULL, 0, 0,
	  "memory of each connection for its request head; a head that does not fit gets "
	  "libmicrohttpd's own 414/431, and a keep-alive connection holds all of it" },
};

#define N_DEFS (sizeof(conf_table) / sizeof(conf_table[0]))

static void
flag_name(const struct conf_def *d, char *out, size_t n)
{
	size_t i;

	for (i = 0; d->name[i] && i + 1 < n; i++)
		out[i] = d->name[i] == '_' ? '-' : (char)tolower((unsigned char)d->name[i]);
	out[i] = '\0';
}

static int
parse_bool(const char *v, int *out)
{
	static const char *yes[] = { "true", "1", "on", "yes" };
	static const char *no[] = { "false", "0", "off", "no" };

	for (size_t i = 0; i < ARRAY_LEN(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static int
enum_has(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *p = choices; p && *p;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == n && strncasecmp(p, v, n) == 0)
			return 1;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

/* Parses v into the field of d; on error writes a message naming the setting and its source. */
static int
conf_set(struct conf *c, const struct conf_def *d, const char *v, const char *src,
	 char *err, size_t errlen)
{
	char *field = (char *)c + d->off;

	switch (d->type) {
	case CT_STR:
		free(*(char **)field);
		*(char **)field = strdup(v);
		QASSERT(*(char **)field != NULL);
		return 0;
	case CT_INT: {
		char *end;
		long long n;

		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || end == v || *end != '\0') {
			snprintf(err, errlen, "%s (%s): '%s' is not an integer", d->name, src, v);
			return -1;
		}
		if (n < d->min || n > d->max) {
			snprintf(err, errlen, "%s (%s): %lld is out of range [%lld, %lld]", d->name,
				 src, n, (long long)d->min, (long long)d->max);
			return -1;
		}
		*(int64_t *)field = n;
		return 0;
	}
	case CT_BOOL:
		if (parse_bool(v, (int *)field) < 0) {
			snprintf(err, errlen, "%s (%s): '%s' is not a boolean (true/false/1/0/on/off)",
				 d->name, src, v);
			return -1;
		}
		return 0;
	case CT_ENUM:
		if (!enum_has(d->choices, v)) {
			snprintf(err, errlen, "%s (%s): '%s' is not one of %s", d->name, src, v,
				 d->choices);
			return -1;
		}
		free(*(char **)field);
		*(char **)field = strdup(v);
		QASSERT(*(char **)field != NULL);
		for (char *p = *(char **)field; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		return 0;
	}
	return -1;
}

static const struct conf_def *
conf_find(const char *name, size_t n)
{
	for (size_t i = 0; i < N_DEFS; i++) {
		const struct conf_def *d = &conf_table[i];

		if ((strlen(d->name) == n && strncasecmp(d->name, name, n) == 0) ||
		    (d->alias && strlen(d->alias) == n && strncasecmp(d->alias, name, n) == 0))
			return d;
	}
	return NULL;
}

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int
conf_read_file(struct conf *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int lineno = 0, rc = 0;

	if (!f) {
		snprintf(err, errlen, "config file %s: %s", path, strerror(errno));
		return -1;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq, *key, *val, src[64];
		const struct conf_def *d;

		lineno++;
		if (*s == '\0' || *s == '#' || *s == ';')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "config file %s:%d: expected NAME = value", path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		if (strlen(val) >= 2 && (val[0] == '"' || val[0] == '\'') &&
		    val[strlen(val) - 1] == val[0]) {
			val[strlen(val) - 1] = '\0';
			val++;
		}
		d = conf_find(key, strlen(key));
		if (!d) {
			snprintf(err, errlen, "config file %s:%d: unknown setting '%s'", path, lineno,
				 key);
			rc = -1;
			break;
		}
		snprintf(src, sizeof(src), "%s:%d", path, lineno);
		rc = conf_set(c, d, val, src, err, errlen);
	}
	fclose(f);
	return rc;
}

static int
conf_read_env(struct conf *c, char *err, size_t errlen)
{
	for (size_t i = 0; i < N_DEFS; i++) {
		const struct conf_def *d = &conf_table[i];
		const char *v = getenv(d->name);

		if (!v && d->alias)
			v = getenv(d->alias);
		if (v && conf_set(c, d, v, "environment", err, errlen) < 0)
			return -1;
	}
	return 0;
}

static void
conf_defaults(struct conf *c)
{
	char err[256];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < N_DEFS; i++)
		QASSERT(conf_set(c, &conf_table[i], conf_table[i].def, "default", err,
				 sizeof(err)) == 0);
}

/* Number of comma-separated elements of s (libpq's host and port lists). */
static size_t
list_len(const char *s)
{
	size_t n = 1;

	for (; *s; s++)
		n += *s == ',';
	return n;
}

/* PG_PORT: one port for every host, or one per host of PG_HOST, each 1 to 65535 (libpq
 * would take an empty element as the default port: refused here, it is a typo). */
static int
pg_ports_check(const struct conf *c, char *err, size_t errlen)
{
	size_t hosts = list_len(c->pg_host), ports = list_len(c->pg_port);
	const char *p = c->pg_port;

	for (;;) {
		char *end;
		long v;

		errno = 0;
		v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
		if (v < 1 || v > 65535 || errno || (*end != ',' && *end != '\0')) {
			snprintf(err, errlen, "PG_PORT: '%s' is not a port (1 to 65535) or a comma "
				 "list of ports", c->pg_port);
			return -1;
		}
		if (*end == '\0')
			break;
		p = end + 1;
	}
	if (ports != 1 && ports != hosts) {
		snprintf(err, errlen, "PG_PORT: %zu ports for %zu hosts of PG_HOST: give one port "
			 "for every host, or one per host", ports, hosts);
		return -1;
	}
	return 0;
}

/* 64 hexadecimal characters: an AES-256 key. */
static int
is_key_hex(const char *k, size_t n)
{
	if (n != 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)k[i]))
			return 0;
	return 1;
}

/* Checks that settings agree with each other, once all overlays are applied. Key material
 * itself (PEM, JWKS) is checked by auth_start, which names the variable too. */
static int
conf_validate(const struct conf *c, char *err, size_t errlen)
{
	const char *k = c->encryption_key;
	struct in_addr addr;
	int64_t need;

	if (k[0] != '\0' && !is_key_hex(k, strlen(k))) {
		snprintf(err, errlen, "QUEEN_ENCRYPTION_KEY: must be 64 hexadecimal characters");
		return -1;
	}
	for (const char *p = c->encryption_key_previous; *p;) {
		size_t n = strcspn(p, ",");

		while (n && isspace((unsigned char)*p)) {
			p++;
			n--;
		}
		while (n && isspace((unsigned char)p[n - 1]))
			n--;
		if (!is_key_hex(p, n)) {
			snprintf(err, errlen, "QUEEN_ENCRYPTION_KEY_PREVIOUS: must be a comma list of "
				 "keys of 64 hexadecimal characters each");
			return -1;
		}
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	if (pg_ports_check(c, err, errlen) < 0)
		return -1;
	if (inet_pton(AF_INET, c->host, &addr) != 1) {
		snprintf(err, errlen, "HOST: '%s' is not an IPv4 address", c->host);
		return -1;
	}
	/* A request head within the limits must reach the broker: libmicrohttpd refuses what
	 * does not fit a connection's memory by itself, without the broker's checks.
	 * Half the memory is the first read buffer; the rest holds a record of each header
	 * field and query parameter (64 bytes each in libmicrohttpd 0.9.75, measured). */
	need = 2 * (c->max_url_bytes + c->max_header_bytes) +
	       64 * (c->max_headers + c->max_query_params);
	if (c->connection_memory_bytes < need) {
		snprintf(err, errlen, "QUEEN_CONNECTION_MEMORY_BYTES: %lld is too small for request "
			 "heads within QUEEN_MAX_URL_BYTES, QUEEN_MAX_HEADER_BYTES, "
			 "QUEEN_MAX_HEADERS and QUEEN_MAX_QUERY_PARAMS: at least 2 x (URL + header "
			 "bytes) + 64 x (headers + query parameters) = %lld",
			 (long long)c->connection_memory_bytes, (long long)need);
		return -1;
	}
	if (c->jwt_enabled && !c->jwt_secret[0] && !c->jwt_public_key[0] && !c->jwt_jwks_url[0] &&
	    !c->jwt_jwks_file[0]) {
		snprintf(err, errlen, "JWT_ENABLED: no key material: set JWT_SECRET, "
			 "JWT_PUBLIC_KEY, JWT_JWKS_URL or JWT_JWKS_FILE");
		return -1;
	}
	return 0;
}

static int
conf_overlay(struct conf *c, const char *file, int argc, char **argv, enum conf_action *action,
	     char *err, size_t errlen)
{
	if (file) {
		if (conf_read_file(c, file, err, errlen) < 0)
			return -1;
		c->config_file = strdup(file);
	}
	if (conf_read_env(c, err, errlen) < 0)
		return -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *eq;
		char fname[64];
		int found = 0;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*action = CONF_HELP;
			continue;
		}
		if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
			*action = CONF_VERSION;
			continue;
		}
		if (strcmp(a, "--check-config") == 0) {
			*action = CONF_CHECK;
			continue;
		}
		if (strcmp(a, "--print-config") == 0) {
			*action = CONF_PRINT;
			continue;
		}
		if (strncmp(a, "--config=", 9) == 0)
			continue;
		if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
			i++;
			continue;
		}
		eq = strchr(a, '=');
		if (strncmp(a, "--", 2) != 0 || !eq) {
			snprintf(err, errlen, "unknown argument '%s' (try --help)", a);
			return -1;
		}
		for (size_t k = 0; k < N_DEFS; k++) {
			flag_name(&conf_table[k], fname, sizeof(fname));
			if (strlen(fname) == (size_t)(eq - a - 2) &&
			    strncmp(fname, a + 2, (size_t)(eq - a - 2)) == 0) {
				if (conf_set(c, &conf_table[k], eq + 1, "command line", err,
					     errlen) < 0)
					return -1;
				found = 1;
				break;
			}
		}
		if (!found) {
			snprintf(err, errlen, "unknown option '%.*s' (try --help)", (int)(eq - a), a);
			return -1;
		}
	}
	return conf_validate(c, err, errlen);
}

/* The command line, kept so a reload applies the same flags again. */
static int conf_argc;
static char **conf_argv;

static const char *
conf_file_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--config=", 9) == 0)
			return argv[i] + 9;
		if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) && i + 1 < argc)
			return argv[i + 1];
	}
	return getenv("QUEEN_CONFIG");
}

int
conf_load(struct conf *out, int argc, char **argv, enum conf_action *action, char *err,
	  size_t errlen)
{
	*action = CONF_RUN;
	conf_argc = argc;
	conf_argv = argv;
	conf_defaults(out);
	if (conf_overlay(out, conf_file_arg(argc, argv), argc, argv, action, err, errlen) < 0) {
		conf_free(out);
		return -1;
	}
	return 0;
}

struct grave {
	struct grave *next;
	char *s;
};

static struct grave *conf_graveyard;

static void
bury(char *s)
{
	struct grave *g = malloc(sizeof(*g));

	QASSERT(g != NULL);
	g->s = s;
	g->next = conf_graveyard;
	conf_graveyard = g;
}

int
conf_reload(struct conf *cur, char *err, size_t errlen)
{
	struct conf next;
	enum conf_action action;

	conf_defaults(&next);
	if (conf_overlay(&next, cur->config_file, conf_argc, conf_argv, &action, err,
			 errlen) < 0) {
		conf_free(&next);
		return -1;
	}
	for (size_t i = 0; i < N_DEFS; i++) {
		const struct conf_def *d = &conf_table[i];
		char *dst = (char *)cur + d->off, *src = (char *)&next + d->off;

		if (!d->reload)
			continue;
		if (d->type == CT_STR || d->type == CT_ENUM) {
			/* The old string is not freed now: another thread may be reading it. It
			 * goes to the graveyard, emptied at exit: a few bytes per reload are the
			 * price of no lock on the read side. */
			if (*(char **)dst && strcmp(*(char **)dst, *(char **)src) == 0)
				continue;
			bury(*(char **)dst);
			*(char **)dst = *(char **)src;
			*(char **)src = NULL;
		} else if (d->type == CT_INT) {
			__atomic_store_n((int64_t *)dst, *(int64_t *)src, __ATOMIC_RELAXED);
		} else {
			__atomic_store_n((int *)dst, *(int *)src, __ATOMIC_RELAXED);
		}
	}
	conf_free(&next);
	return 0;
}

void
conf_free(struct conf *c)
{
	for (size_t i = 0; i < N_DEFS; i++) {
		const struct conf_def *d = &conf_table[i];

		if (d->type == CT_STR || d->type == CT_ENUM) {
			free(*(char **)((char *)c + d->off));
			*(char **)((char *)c + d->off) = NULL;
		}
	}
	free(c->config_file);
	c->config_file = NULL;
	if (c == &qconf) {
		while (conf_graveyard) {
			struct grave *g = conf_graveyard;

			conf_graveyard = g->next;
			free(g->s);
			free(g);
		}
	}
}

void
conf_print_help(FILE *f)
{
	char fname[64];

	fprintf(f, "Usage: queend [--config=FILE] [--NAME=VALUE ...]\n"
		   "       queend --help | --version | --check-config | --print-config\n\n"
		   "queend is a partitioned message queue broker whose only state is PostgreSQL.\n"
		   "Every setting is read from its environment variable, the config file\n"
		   "(NAME = value) or its flag; flags win over the environment, which wins over\n"
		   "the file. Settings marked [reload] are re-read on SIGHUP.\n\n");
	for (size_t i = 0; i < N_DEFS; i++) {
		const struct conf_def *d = &conf_table[i];

		flag_name(d, fname, sizeof(fname));
		fprintf(f, "  --%s=VALUE, %s%s%s\n      %s (default: %s)%s\n", fname, d->name,
			d->alias ? " or " : "", d->alias ? d->alias : "", d->help,
			d->def[0] ? d->def : "empty",
			d->reload ? " [reload]" : "");
	}
}

void
conf_print(const struct conf *c, FILE *f)
{
	for (size_t i = 0; i < N_DEFS; i++) {
		const struct conf_def *d = &conf_table[i];
		const char *field = (const char *)c + d->off;

		fprintf(f, "%s = ", d->name);
		if (d->secret) {
			const char *s = *(char *const *)field;

			fprintf(f, "%s\n", s && *s ? "(set)" : "");
			continue;
		}
		switch (d->type) {
		case CT_STR:
		case CT_ENUM:
			fprintf(f, "%s\n", *(char *const *)field);
			break;
		case CT_INT:
			fprintf(f, "%lld\n", (long long)*(const int64_t *)field);
			break;
		case CT_BOOL:
			fprintf(f, "%s\n", *(const int *)field ? "true" : "false");
			break;
		}
	}
}

/* Quotes a conninfo value: single quotes, with ' and \ escaped. */
static void
conninfo_add(char **buf, size_t *len, const char *key, const char *val)
{
	size_t need = *len + strlen(key) + 2 * strlen(val) + 5;

	*buf = realloc(*buf, need + 1);
	QASSERT(*buf != NULL);
	*len += (size_t)sprintf(*buf + *len, "%s='", key);
	for (const char *p = val; *p; p++) {
		if (*p == '\'' || *p == '\\')
			(*buf)[(*len)++] = '\\';
		(*buf)[(*len)++] = *p;
	}
	(*buf)[(*len)++] = '\'';
	(*buf)[(*len)++] = ' ';
	(*buf)[*len] = '\0';
}

char *
conf_conninfo(const struct conf *c)
{
	char *buf = NULL;
	size_t len = 0;

	conninfo_add(&buf, &len, "host", c->pg_host);
	conninfo_add(&buf, &len, "port", c->pg_port);
	conninfo_add(&buf, &len, "user", c->pg_user);
	conninfo_add(&buf, &len, "password", c->pg_password);
	conninfo_add(&buf, &len, "dbname", c->pg_db);
	conninfo_add(&buf, &len, "sslmode", c->pg_use_ssl ? "require" : "prefer");
	conninfo_add(&buf, &len, "application_name", "queend");
	conninfo_add(&buf, &len, "connect_timeout", "5");
	/* Of several hosts, only the primary: a standby (or a primary being demoted) is skipped
	 * at connect time, so no statement ever meets a read-only server by surprise. */
	conninfo_add(&buf, &len, "target_session_attrs", "read-write");
	return buf;
}
