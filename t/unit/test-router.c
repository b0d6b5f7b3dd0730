/* Unit tests of router: literal and parameter matching, wildcard, 404 vs 405 with Allow. */
#include "router.h"
#include "tap.h"

#include <stdlib.h>

int
main(void)
{
	const struct route *rt;
	char *params[4];
	int np = 0;
	char allow[64];

	ok(route_match("POST", "/api/v1/push", &rt, params, &np, allow, sizeof(allow)) ==
		   ROUTE_FOUND && np == 0, "push matches");
	ok(route_match("GET", "/api/v1/pop/queue/orders%2Fx/partition/p%201", &rt, params, &np,
		       allow, sizeof(allow)) == ROUTE_FOUND && np == 2, "pop with partition");
	is_str(params[0], "orders/x", "first parameter is decoded");
	is_str(params[1], "p 1", "second parameter is decoded");
	free(params[0]);
	free(params[1]);
	ok(route_match("GET", "/api/v1/push", &rt, params, &np, allow, sizeof(allow)) ==
		   ROUTE_NO_METHOD, "GET push is a 405");
	is_str(allow, "POST", "Allow lists POST");
	ok(route_match("PATCH", "/api/v1/resources/queues/q", &rt, params, &np, allow,
		       sizeof(allow)) == ROUTE_NO_METHOD, "PATCH on a queue is a 405");
	is_str(allow, "GET, DELETE", "Allow lists GET and DELETE");
	ok(route_match("GET", "/api/v1/nope", &rt, params, &np, allow, sizeof(allow)) ==
		   ROUTE_NO_PATH, "unknown path is a 404");
	ok(route_match("GET", "/api/v1/pop/queue/", &rt, params, &np, allow, sizeof(allow)) ==
		   ROUTE_NO_PATH, "an empty parameter does not match");
	return tap_done();
}
