/* fuzz-conf: libFuzzer target of the configuration parser (src/conf.c).
 *
 * The input is a config file, then, after a NUL byte, command-line arguments separated by NUL
 * bytes. It goes through conf_load exactly as at start-up (the file named by --config=), and a
 * loaded configuration is printed and turned into a conninfo. The oracle: loading either
 * succeeds with every integer inside its range or fails with a message, and never leaks (the
 * configuration is freed either way). */
#include "conf.h"
#include "log.h"
#include "qassert.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_ARGS 16

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int file_fd = -1;
static char file_arg[64];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* The environment is part of the overlay: start from a known one. */
	static const char *const names[] = { "HOST", "PORT", "PG_HOST", "PG_PORT", "PG_USER",
		"PG_PASSWORD", "PG_DB", "PG_DATABASE", "DB_POOL_SIZE", "NUM_WORKERS",
		"FILE_BUFFER_DIR", "LOG_LEVEL", "QUEEN_CONFIG", "JWT_ENABLED" };

	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		unsetenv(names[i]);
	file_fd = memfd_create("fuzz-conf", 0);
	QASSERT(file_fd >= 0);
	snprintf(file_arg, sizeof(file_arg), "--config=/proc/self/fd/%d", file_fd);
	log_set_level(LOG_LV_ERROR);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size), *p;
	size_t flen = nul ? (size_t)(nul - data) : size;
	char *argv[MAX_ARGS + 3], a0[] = "queend", *copy = NULL, err[512];
	int argc = 0;
	enum conf_action action;
	struct conf c;

	QASSERT(ftruncate(file_fd, 0) == 0);
	QASSERT(pwrite(file_fd, data, flen, 0) == (ssize_t)flen);
	argv[argc++] = a0;
	argv[argc++] = file_arg;
	if (nul) {
		copy = malloc(size - flen);
		QASSERT(copy != NULL);
		memcpy(copy, nul + 1, size - flen - 1);
		copy[size - flen - 1] = '\0';
		for (p = (const uint8_t *)copy; argc < MAX_ARGS + 2 &&
		     p < (const uint8_t *)copy + (size - flen - 1); p += strlen((const char *)p) + 1)
			argv[argc++] = (char *)p;
	}
	argv[argc] = NULL;
	err[0] = '\0';
	if (conf_load(&c, argc, argv, &action, err, sizeof(err)) == 0) {
		FILE *devnull = fopen("/dev/null", "w");
		char *ci;

		QASSERT(c.port >= 1 && c.port <= 65535 && c.pg_port != NULL);
		QASSERT(c.db_pool_size >= 1 && c.max_body_bytes >= 1024);
		QASSERT(c.host && c.pg_host && c.log_level && c.default_subscription_mode);
		QASSERT(devnull != NULL);
		conf_print(&c, devnull);
		fclose(devnull);
		ci = conf_conninfo(&c);
		QASSERT(ci != NULL);
		free(ci);
		conf_free(&c);
	} else {
		QASSERT(err[0] != '\0');
	}
	free(copy);
	return 0;
}
