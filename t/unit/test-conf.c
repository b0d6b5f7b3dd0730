/* Unit tests of conf: defaults, precedence (file < env < flags), errors naming the setting. */
#include "conf.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main(void)
{
	struct conf c;
	enum conf_action a;
	char err[512], *ci;
	char path[] = "/tmp/queen-conf-XXXXXX";
	int fd = mkstemp(path);
	char a0[] = "queend", a_port[] = "--port=7001", a_bad[] = "--no-such-thing=1",
	     a_check[] = "--check-config";
	char *argv_flags[] = { a0, a_port, NULL };
	char *argv_bad[] = { a0, a_bad, NULL };
	char *argv_check[] = { a0, a_check, NULL };

	unsetenv("PORT");
	unsetenv("PG_DB");
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) == 0, "defaults load");
	is_int(c.port, 6632, "PORT defaults to 6632");
	is_int(c.db_pool_size, 16, "DB_POOL_SIZE defaults to 16");
	is_str(c.default_subscription_mode, "new", "subscription mode defaults to new");
	conf_free(&c);

	dprintf(fd, "# a comment\nPORT = 7000\npg_db = 'fromfile'\n");
	close(fd);
	setenv("QUEEN_CONFIG", path, 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) == 0, "file loads");
	is_int(c.port, 7000, "the file sets PORT");
	is_str(c.pg_db, "fromfile", "keys are case-insensitive and quotes are dropped");
	conf_free(&c);
	setenv("PORT", "7002", 1);
	setenv("PG_DATABASE", "alias", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) == 0, "env loads");
	is_int(c.port, 7002, "the environment wins over the file");
	is_str(c.pg_db, "alias", "PG_DATABASE is an alias of PG_DB");
	conf_free(&c);
	ok(conf_load(&c, 2, argv_flags, &a, err, sizeof(err)) == 0, "flags load");
	is_int(c.port, 7001, "a flag wins over the environment");
	conf_free(&c);

	setenv("PORT", "abc", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0, "a bad value fails");
	ok(strstr(err, "PORT") != NULL, "and names the setting: %s", err);
	setenv("PORT", "70000", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0 && strstr(err, "range"),
	   "out of range is refused: %s", err);
	unsetenv("PORT");
	setenv("DEFAULT_SUBSCRIPTION_MODE", "sometimes", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0 &&
	   strstr(err, "DEFAULT_SUBSCRIPTION_MODE"), "bad enum names the setting");
	unsetenv("DEFAULT_SUBSCRIPTION_MODE");
	ok(conf_load(&c, 2, argv_bad, &a, err, sizeof(err)) < 0, "unknown flag is refused");
	ok(conf_load(&c, 2, argv_check, &a, err, sizeof(err)) == 0 && a == CONF_CHECK,
	   "--check-config is an action");
	conf_free(&c);
	setenv("QUEEN_ENCRYPTION_KEY", "abc", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0 &&
	   strstr(err, "QUEEN_ENCRYPTION_KEY"), "a short encryption key is refused");
	unsetenv("QUEEN_ENCRYPTION_KEY");

	/* PG_PORT: one port for every host, or one per host (libpq's lists). */
	setenv("PG_HOST", "db1,db2", 1);
	setenv("PG_PORT", "5433", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) == 0, "one port for two hosts");
	ci = c.pg_host ? conf_conninfo(&c) : NULL;
	ok(ci && strstr(ci, "host='db1,db2'") && strstr(ci, "port='5433'") &&
	   strstr(ci, "target_session_attrs='read-write'"),
	   "the conninfo asks for the read-write one: %s", ci ? ci : "(none)");
	free(ci);
	conf_free(&c);
	setenv("PG_PORT", "5433,5434", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) == 0, "a port per host");
	conf_free(&c);
	setenv("PG_PORT", "5433,5434,5435", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0 && strstr(err, "PG_PORT"),
	   "three ports for two hosts are refused: %s", err);
	setenv("PG_PORT", "5433,", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0 && strstr(err, "PG_PORT"),
	   "an empty port is refused: %s", err);
	setenv("PG_PORT", "70000", 1);
	ok(conf_load(&c, 1, argv_flags, &a, err, sizeof(err)) < 0 && strstr(err, "PG_PORT"),
	   "a port out of range is refused: %s", err);
	unsetenv("PG_PORT");
	unsetenv("PG_HOST");
	unsetenv("QUEEN_CONFIG");
	unsetenv("PG_DATABASE");
	unlink(path);
	return tap_done();
}
