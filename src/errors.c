/* errors: the table mapping each error code to HTTP status, name and default message. */
#include "errors.h"
#include "qassert.h"

static const struct {
	int status;
	const char *name;
	const char *message;
} qe_table[QE__COUNT] = {
	[QE_OK] = { 200, "ok", "ok" },
	[QE_PARKED] = { 0, "parked", "parked" },
	[QE_BAD_BODY] = { 400, "bad_body", "bad body" },
	[QE_BAD_REQUEST] = { 400, "bad_request", "bad request" },
	[QE_UNAUTHORIZED] = { 401, "unauthorized", "Authentication required" },
	[QE_FORBIDDEN] = { 403, "forbidden", "Insufficient permissions" },
	[QE_NOT_FOUND] = { 404, "not_found", "not found" },
	[QE_NO_RESOURCE] = { 404, "no_resource", "not found" },
	[QE_METHOD] = { 405, "method", "method not allowed" },
	[QE_TOO_LARGE] = { 413, "too_large", "payload too large" },
	[QE_URL_TOO_LONG] = { 414, "url_too_long", "URL too long" },
	[QE_HEAD_TOO_LARGE] = { 431, "head_too_large", "request header fields too large" },
	[QE_BUSY] = { 429, "busy", "too many requests" },
	[QE_INTERNAL] = { 500, "internal", "internal error" },
	[QE_DB] = { 503, "db", "database unavailable" },
	[QE_NO_KEY] = { 503, "no_key", "encryption key not configured" },
	[QE_SHUTDOWN] = { 503, "shutdown", "server is shutting down" },
};

int
qe_status(enum qe e)
{
	QASSERT(e >= 0 && e < QE__COUNT);
	return qe_table[e].status;
}

const char *
qe_name(enum qe e)
{
	QASSERT(e >= 0 && e < QE__COUNT);
	return qe_table[e].name;
}

const char *
qe_message(enum qe e)
{
	QASSERT(e >= 0 && e < QE__COUNT);
	return qe_table[e].message;
}
