/* h_status: the read-only operator views (SPEC 16): GET /api/v1/resources/queues, /overview,
 * /namespaces, /tasks, GET /api/v1/status and /api/v1/status/queues.
 *
 * Each is one call of a SQL function of schema/007_retention_status.sql returning the JSON
 * answer; counts are offset arithmetic on partition and cursor rows, never a scan of
 * messages. /api/v1/status adds what only the broker knows (its counters, retention rounds).
 * Worker thread; errors go through req_fail (503 when the database does not answer, 400 for a
 * bad query parameter). */
#ifndef QUEEN_H_STATUS_H
#define QUEEN_H_STATUS_H

#include "errors.h"

struct req;
struct wk;

/* {"queues":[{id,name,namespace,task,createdAt,partitions,messages,pending,processing,
 * completed,consumerGroups,lastMessageAt}],"total":N}, by name. */
enum qe h_resources_queues(struct req *r, struct wk *w);
/* {queues,partitions,namespaces,tasks,consumerGroups,messages:{total,pending,processing,
 * completed,deadLetter},leases:{active},lastMessageAt,timestamp}. */
enum qe h_resources_overview(struct req *r, struct wk *w);
/* {"namespaces":[{namespace,queues,partitions,messages,pending,processing}],"total":N}. */
enum qe h_resources_namespaces(struct req *r, struct wk *w);
/* {"tasks":[{namespace,task,queues,partitions,messages,pending,processing}],"total":N}. */
enum qe h_resources_tasks(struct req *r, struct wk *w);
/* {status,version,uptimeSeconds,time,broker:{…},retention:{…},database:{…}}; answers 200
 * with "status":"degraded" and database {"connected":false} when PostgreSQL is down. */
enum qe h_status(struct req *r, struct wk *w);
/* ?namespace=&task=&limit=100&offset=0 -> {"queues":[…],"pagination":{limit,offset},
 * "total":N,"timestamp"}. */
enum qe h_status_queues(struct req *r, struct wk *w);

#endif
