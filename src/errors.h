/* errors: the one error vocabulary of the broker.
 *
 * Every fallible function returns an enum qe; results go out through pointers. The table in
 * errors.c maps each code to its HTTP status and its default message; http.c renders every
 * error body from it, so no handler builds error JSON itself. */
#ifndef QUEEN_ERRORS_H
#define QUEEN_ERRORS_H

enum qe {
	QE_OK = 0,
	QE_PARKED,		/* not an error: the request waits in a long-poll */
	QE_BAD_BODY,		/* 400 bad body: <what> */
	QE_BAD_REQUEST,		/* 400 with a message of its own */
	QE_UNAUTHORIZED,	/* 401 */
	QE_FORBIDDEN,		/* 403 */
	QE_NOT_FOUND,		/* 404 not found (unknown route) */
	QE_NO_RESOURCE,		/* 404 with a message of its own (unknown queue, row, ...) */
	QE_METHOD,		/* 405 */
	QE_TOO_LARGE,		/* 413 */
	QE_URL_TOO_LONG,	/* 414 */
	QE_HEAD_TOO_LARGE,	/* 431 request header fields too large */
	QE_BUSY,		/* 429 job queue full */
	QE_INTERNAL,		/* 500 */
	QE_DB,			/* 503 database unavailable or failing */
	QE_NO_KEY,		/* 503 encrypted queue, no QUEEN_ENCRYPTION_KEY */
	QE_SHUTDOWN,		/* 503 the broker is stopping */
	QE__COUNT
};

/* HTTP status of an error code. */
int qe_status(enum qe e);
/* Stable short name, used in logs and metrics ("bad_body", "db", ...). */
const char *qe_name(enum qe e);
/* Default message for the error body when the handler gave none. */
const char *qe_message(enum qe e);

#endif
