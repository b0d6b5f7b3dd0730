/* fuzz-router: libFuzzer target of the router, path decoding and every route's prepare step
 * (src/router.c, src/http.c req_prepare and the h_*_prepare functions).
 *
 * The input is a request as text: "METHOD URL\n" then the body. The URL's query string is
 * split as libmicrohttpd does; path and query reach the broker raw (any bytes but NUL) and
 * are decoded and checked by it. A matched request is then checked, parsed and prepared
 * exactly as the access handler does before a worker sees it. The oracle: whatever the bytes, preparing answers OK or a 4xx,
 * never a 5xx (nothing before the worker touches the database), and the Allow list of a 405
 * names only methods. */
#include "conf.h"
#include "errors.h"
#include "http.h"
#include "log.h"
#include "qassert.h"
#include "router.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char a0[] = "queend", *args[] = { a0, NULL };
	enum conf_action action;
	char err[512];

	/* Default settings, whatever the environment says. */
	unsetenv("QUEEN_CONFIG");
	QASSERT(conf_load(&qconf, 1, args, &action, err, sizeof(err)) == 0);
	log_set_level(LOG_LV_ERROR);
	return 0;
}

/* Copies n bytes into a new NUL-terminated string (stopping at a NUL inside). */
static char *
cstr(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	QASSERT(s != NULL);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* The query string as libmicrohttpd hands it to the access handler: pairs split at '&' and
 * '=', raw (the broker decodes them itself); a key without '=' has no value. */
static void
add_query(struct req *r, char *q)
{
	for (char *tok = strtok(q, "&"); tok; tok = strtok(NULL, "&")) {
		char *eq = strchr(tok, '=');

		if (eq)
			*eq++ = '\0';
		req_add_query(r, tok, eq);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size), *sp;
	size_t line = nl ? (size_t)(nl - data) : size;
	char *method, *url, *query, allow[64];
	size_t plens[REQ_MAX_PARAMS];
	struct req *r;
	enum qe e;

	sp = memchr(data, ' ', line);
	if (!sp)
		return 0;
	method = cstr(data, (size_t)(sp - data));
	url = cstr(sp + 1, line - (size_t)(sp - data) - 1);
	query = strchr(url, '?');
	if (query)
		*query++ = '\0';
	r = req_new(NULL, method, url);
	switch (route_match(r->method, r->path, &r->route, r->params, plens, &r->nparams, allow,
			    sizeof(allow))) {
	case ROUTE_NO_PATH:
		QASSERT(allow[0] == '\0');
		break;
	case ROUTE_NO_METHOD:
		QASSERT(allow[0] >= 'A' && allow[0] <= 'Z');
		QASSERT(strspn(allow, "ABCDEFGHIJKLMNOPQRSTUVWXYZ, ") == strlen(allow));
		break;
	case ROUTE_FOUND:
		QASSERT(r->nparams >= 0 && r->nparams <= REQ_MAX_PARAMS);
		for (int i = 0; i < r->nparams; i++)
			QASSERT(r->params[i] != NULL && plens[i] >= strlen(r->params[i]));
		e = req_check_params(r, plens);
		if (e == QE_OK && query)
			add_query(r, query);
		if (e == QE_OK && r->bad_input)
			e = QE_BAD_REQUEST;
		if (e == QE_OK && nl)
			sb_add(&r->body, (const char *)nl + 1, size - line - 1);
		if (e == QE_OK)
			e = req_prepare(r);
		if (e != QE_OK) {
			int status = qe_status(e);

			if (status < 400 || status > 499) {
				fprintf(stderr, "fuzz-router: %s %s answered %d (%s: %s)\n", method,
					url, status, qe_name(e), r->err_msg ? r->err_msg : "");
				abort();
			}
		}
		break;
	}
	req_free(r);
	free(method);
	free(url);
	return 0;
}
