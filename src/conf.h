/* conf: the one table of every setting (name, type, default, range, reload or restart, help).
 *
 * Precedence: defaults < config file < environment < command-line flags. The environment names
 * are those of the reference broker (PORT, PG_HOST, ...); the config file uses the same names
 * (case-insensitive, "NAME = value"), and each has a flag, --lower-case-with-dashes=value.
 * --help, --version, --check-config and --print-config are all generated from the table. */
#ifndef QUEEN_CONF_H
#define QUEEN_CONF_H

#include <stdint.h>
#include <stdio.h>

struct conf {
	char *host;
	int64_t port;
	char *pg_host;
	char *pg_port;		/* one port, or a comma list: one per host */
	char *pg_user;
	char *pg_password;
	char *pg_db;
	int pg_use_ssl;
	int64_t db_pool_size;
	int64_t num_workers;
	int64_t max_body_bytes;
	int64_t stmt_timeout_ms;
	int64_t default_timeout;
	char *default_subscription_mode;
	int pop_autopilot;
	int64_t pop_autopilot_batch;
	int64_t retention_interval;
	int64_t retention_batch_size;
	char *file_buffer_dir;
	char *encryption_key;
	char *encryption_key_previous;
	int protected_mode;
	int jwt_enabled;
	char *jwt_algorithm;
	char *jwt_secret;
	char *jwt_public_key;
	char *jwt_jwks_url;
	char *jwt_jwks_file;
	int64_t jwt_jwks_refresh_interval;
	int64_t jwt_jwks_timeout_ms;
	char *jwt_skip_paths;
	int64_t jwt_clock_skew;
	char *jwt_issuer;
	char *jwt_audience;
	char *jwt_roles_claim;
	char *jwt_roles_array_claim;
	char *jwt_role_admin;
	char *jwt_role_read_write;
	char *jwt_role_read_only;
	char *jwt_role_write_only;
	char *log_level;
	int64_t max_queued_jobs;
	int64_t group_commit_items;
	int64_t push_lanes;
	int64_t bulk_nice;
	int64_t index_resync_ms;
	int64_t max_push_items;
	int64_t max_inflight_bytes;
	int64_t max_longpolls;
	int64_t max_name_bytes;
	int64_t max_url_bytes;
	int64_t max_header_bytes;
	int64_t max_query_params;
	int64_t max_headers;
	int64_t connection_memory_bytes;
	char *config_file;	/* where the settings came from, when a file was read */
};

enum conf_action { CONF_RUN, CONF_HELP, CONF_VERSION, CONF_CHECK, CONF_PRINT };

/* The settings the broker runs with. Written by main at start-up and on SIGHUP (reloadable
 * fields only, see conf_reload); read by every thread. */
extern struct conf qconf;

/* Builds a configuration from defaults, the config file (--config=FILE or QUEEN_CONFIG), the
 * environment and argv. On error returns -1 with a message naming the setting in err; out is
 * then freed. The caller owns out and frees it with conf_free. */
int conf_load(struct conf *out, int argc, char **argv, enum conf_action *action,
	      char *err, size_t errlen);
void conf_free(struct conf *c);
/* Re-reads file and environment; copies only the settings marked reloadable into cur.
 * On error cur is untouched and -1 is returned with err set. */
int conf_reload(struct conf *cur, char *err, size_t errlen);
void conf_print_help(FILE *f);
/* Every setting with its effective value; secrets are printed as "(set)". */
void conf_print(const struct conf *c, FILE *f);
/* libpq conninfo for the configured database (caller frees). */
char *conf_conninfo(const struct conf *c);

#endif
