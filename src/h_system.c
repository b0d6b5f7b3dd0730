/* h_system: the spool's status view and the two maintenance switches (routes: h_system.h).
 * The push switch and the counters belong to spool.c; the pop switch is this file's one
 * piece of state, read by h_pop.c on every pop. Answers need no database except dbHealthy,
 * which is a live ping on the worker's connection. */
#include "h_system.h"
#include "dbpool.h"
#include "http.h"
#include "jsonio.h"
#include "log.h"
#include "spool.h"
#include "workers.h"

#include <stdatomic.h>

static _Atomic int pops_paused;

int
h_system_pops_paused(void)
{
	return atomic_load(&pops_paused);
}

enum qe
h_buffers(struct req *r, struct wk *w)
{
	int healthy = db_ping(w->db);
	struct strbuf sb;

	sb_init(&sb);
	sb_addf(&sb, "{\"pendingCount\":%ld,\"failedCount\":%ld,\"dbHealthy\":%s}",
		spool_pending(), spool_failed(), healthy ? "true" : "false");
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}

enum qe
h_maintenance_prepare(struct req *r)
{
	char err[128];
	json_t *v;

	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object {\"enabled\":true|false}");
	if (jio_field(r->json, "enabled", JIO_BOOL, &v, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (!v)
		return req_fail(r, QE_BAD_BODY, "enabled is required (true or false)");
	return QE_OK;
}

static enum qe
reply_enabled(struct req *r, int on)
{
	req_reply_text(r, 200, on ? "{\"enabled\":true}" : "{\"enabled\":false}");
	return QE_OK;
}

enum qe
h_maintenance_get(struct req *r, struct wk *w)
{
	return reply_enabled(r, spool_maintenance());
}

enum qe
h_maintenance_set(struct req *r, struct wk *w)
{
	int on = json_is_true(json_object_get(r->json, "enabled"));

	spool_set_maintenance(on);
	return reply_enabled(r, spool_maintenance());
}

enum qe
h_maintenance_pop_get(struct req *r, struct wk *w)
{
	return reply_enabled(r, h_system_pops_paused());
}

enum qe
h_maintenance_pop_set(struct req *r, struct wk *w)
{
	int on = json_is_true(json_object_get(r->json, "enabled"));

	if (atomic_exchange(&pops_paused, on) != on)
		log_warn("pop maintenance %s: pops %s", on ? "on" : "off",
			 on ? "answer 204" : "deliver again");
	return reply_enabled(r, on);
}
