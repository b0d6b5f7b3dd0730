/* Unit tests of router: literal and parameter matching, wildcard, 404 vs 405 with Allow. */
#include "router.h"
#include "tap.h"

#include <stdlib.h>

int
main(void)
{
	const struct route *rt;
	char *params[4];
	size_t plens[4];
	int np = 0;
	char allow[64];

	ok(route_match("POST", "/api/v1/push", &rt, params, plens, &np, allow, sizeof(allow)) ==
		   ROUTE_FOUND && np == 0, "push matches");
	ok(route_match("GET", "/api/v1/pop/queue/orders%2Fx/partition/p%201", &rt, params, plens, &np,
		       allow, sizeof(allow)) == ROUTE_FOUND && np == 2, "pop with partition");
	is_str(params[0], "orders/x", "first parameter is decoded");
	is_str(params[1], "p 1", "second parameter is decoded");
	free(params[0]);
	free(params[1]);
	ok(route_match("GET", "/api/v1/push", &rt, params, plens, &np, allow, sizeof(allow)) ==
		   ROUTE_NO_METHOD, "GET push is a 405");
	is_str(allow, "POST", "Allow lists POST");
	ok(route_match("PATCH", "/api/v1/resources/queues/q", &rt, params, plens, &np, allow,
		       sizeof(allow)) == ROUTE_NO_METHOD, "PATCH on a queue is a 405");
	is_str(allow, "GET, DELETE", "Allow lists GET and DELETE");
	ok(route_match("GET", "/api/v1/nope", &rt, params, plens, &np, allow, sizeof(allow)) ==
		   ROUTE_NO_PATH, "unknown path is a 404");
	ok(route_match("GET", "/api/v1/pop/queue/", &rt, params, plens, &np, allow, sizeof(allow)) ==
		   ROUTE_NO_PATH, "an empty parameter does not match");
	ok(route_match("DELETE", "/api/v1/consumer-groups/a%2Fqueues%2Fb", &rt, params, plens, &np,
		       allow, sizeof(allow)) == ROUTE_FOUND && np == 1,
	   "an encoded slash stays inside its parameter");
	is_str(params[0], "a/queues/b", "the group is a/queues/b, not group a of queue b");
	free(params[0]);
	ok(route_match("GET", "/api/v1/pop/queue/a%2541%00", &rt, params, plens, &np, allow,
		       sizeof(allow)) == ROUTE_FOUND && np == 1, "pop on an escaped name");
	is_str(params[0], "a%41", "decoded once: an encoded percent sign is a percent sign");
	ok(plens[0] == 5, "an encoded NUL counts in the decoded length");
	free(params[0]);
	return tap_done();
}
