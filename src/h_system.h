/* h_system: spool status and maintenance switches (SPEC 15):
 *   GET  /api/v1/status/buffers            {"pendingCount","failedCount","dbHealthy"}
 *   GET  /api/v1/system/maintenance        {"enabled"}: pushes diverted to the spool
 *   POST /api/v1/system/maintenance        {"enabled":true|false}
 *   GET  /api/v1/system/maintenance/pop    {"enabled"}: pops answer 204
 *   POST /api/v1/system/maintenance/pop    {"enabled":true|false}
 * Both switches live in the memory of this broker: other brokers on the same database are not
 * affected, and a restart turns them off. */
#ifndef QUEEN_H_SYSTEM_H
#define QUEEN_H_SYSTEM_H

#include "errors.h"

struct req;
struct wk;

enum qe h_buffers(struct req *r, struct wk *w);
/* MHD thread: the body must be {"enabled":<boolean>}, else 400. */
enum qe h_maintenance_prepare(struct req *r);
enum qe h_maintenance_get(struct req *r, struct wk *w);
enum qe h_maintenance_set(struct req *r, struct wk *w);
enum qe h_maintenance_pop_get(struct req *r, struct wk *w);
enum qe h_maintenance_pop_set(struct req *r, struct wk *w);

/* 1 while pop maintenance is on: pops deliver nothing. Any thread. */
int h_system_pops_paused(void);

#endif
