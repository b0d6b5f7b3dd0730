/* h_groups: consumer groups, their subscription start and seek (SPEC 10).
 *
 * Every handler runs on a worker thread and makes one call of a schema/functions/groups.sql function; the
 * ones that move or remove cursors then bring the partition index up to date (committed
 * offset, no lease) and wake the pops parked on the queues concerned, since data may have
 * become deliverable for them. */
#ifndef QUEEN_H_GROUPS_H
#define QUEEN_H_GROUPS_H

#include "errors.h"

struct req;
struct wk;

/* GET /api/v1/consumer-groups: one element per (group, queue). */
enum qe h_groups_list(struct req *r, struct wk *w);
/* GET /api/v1/consumer-groups/lagging?minLagSeconds=N (default 3600): one element per
 * (group, partition) whose oldest unconsumed message is at least N seconds old. */
enum qe h_groups_lagging(struct req *r, struct wk *w);
/* GET /api/v1/consumer-groups/:group: per queue, per partition; 404 for an unknown group. */
enum qe h_group_get(struct req *r, struct wk *w);
/* DELETE /api/v1/consumer-groups/:group and …/:group/queues/:queue
 * [?deleteMetadata=true|false] (default true: the stored start goes too). */
enum qe h_group_delete(struct req *r, struct wk *w);
/* POST /api/v1/consumer-groups/:group/subscription {"subscriptionTimestamp":"ISO"|"now"}:
 * prepare validates the body (MHD thread), run stores the new start. */
enum qe h_group_subscription_prepare(struct req *r);
enum qe h_group_subscription_run(struct req *r, struct wk *w);
/* POST …/:group/queues/:queue/seek and …/partitions/:partition/seek with {"toEnd":true} or
 * {"timestamp":"ISO"}; on the partition route an empty body (or {}) means the end. */
enum qe h_seek_prepare(struct req *r);
enum qe h_seek_run(struct req *r, struct wk *w);

#endif
