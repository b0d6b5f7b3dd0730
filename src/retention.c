/* retention: schedules retention rounds, runs the advance step of each round in small
 * transactions, and turns the answers into index updates and counters. What is due and in
 * which order locks are taken is decided in SQL (schema/functions/retention.sql).
 *
 * Invariant kept by the SQL side: the segments of a partition always cover
 * [log_start, log end]; an advance moves log_start first, a later round deletes the segments
 * left below it, so no reader ever finds a hole. */
#include "retention.h"
#include "conf.h"
#include "dbpool.h"
#include "http.h"
#include "log.h"
#include "pindex.h"
#include "strbuf.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static _Atomic uint64_t st_rounds, st_skipped, st_failed, st_segments, st_advanced, st_dedup;
static _Atomic int64_t st_last_run_ms, st_last_segments;

int64_t
retention_interval_ms(void)
{
	return qconf.retention_interval;
}

static int64_t
int_field(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* Cursors left below the new log start of their partition: the index counts them from the
 * log start, so a group whose messages were all retained away is not "ready" any more. */
static void
apply_cursor_fixups(json_t *fix)
{
	size_t i;
	json_t *row;

	json_array_foreach(fix, i, row) {
		json_t *pid = json_array_get(row, 0), *group = json_array_get(row, 1);
		json_t *cm = json_array_get(row, 2);

		if (json_is_string(pid) && json_is_string(group) && json_is_integer(cm))
			pidx_cursor(json_string_value(pid),
				    pidx_group_hash(json_string_value(group)),
				    (int64_t)json_integer_value(cm), -1);
	}
}

/* Writes rows [from, to) of the plan ([pid, start, count] each) as three array literals,
 * one per column, into sb[0..2]. */
static void
plan_arrays(json_t *plan, size_t from, size_t to, struct strbuf *sb)
{
	for (int col = 0; col < 3; col++) {
		sb_addc(&sb[col], '{');
		for (size_t i = from; i < to; i++) {
			json_t *v = json_array_get(json_array_get(plan, i), (size_t)col);

			if (i > from)
				sb_addc(&sb[col], ',');
			if (json_is_string(v))
				sb_adds(&sb[col], json_string_value(v));
			else if (json_is_integer(v))
				sb_add_i64(&sb[col], (int64_t)json_integer_value(v));
			else
				sb_addc(&sb[col], '0');
		}
		sb_addc(&sb[col], '}');
	}
}

/* Step 4: moves the log starts the round planned, RETENTION_ADVANCE_CHUNK partitions per
 * transaction, until done or another broker's round takes over. Returns the partitions
 * advanced; adds the segments released to *released. */
static int64_t
advance(struct dbconn *db, json_t *plan, int64_t *released)
{
	size_t n = json_array_size(plan);
	int64_t advanced = 0;

	for (size_t from = 0; from < n; from += RETENTION_ADVANCE_CHUNK) {
		size_t to = from + RETENTION_ADVANCE_CHUNK < n ? from + RETENTION_ADVANCE_CHUNK : n;
		struct strbuf sb[3];
		const char *params[3];
		char *text = NULL;
		json_t *ans;
		enum qe e;

		for (int i = 0; i < 3; i++)
			sb_init(&sb[i]);
		plan_arrays(plan, from, to, sb);
		for (int i = 0; i < 3; i++)
			params[i] = sb[i].buf;
		e = db_exec_json(db, SQL_RETENTION_ADVANCE, params, &text);
		for (int i = 0; i < 3; i++)
			sb_free(&sb[i]);
		if (e != QE_OK || !text) {
			free(text);
			atomic_fetch_add(&st_failed, 1);
			break;
		}
		ans = json_loads(text, 0, NULL);
		free(text);
		if (json_is_true(json_object_get(ans, "skipped"))) {
			/* Another broker's round runs now; it plans the rest again. */
			json_decref(ans);
			break;
		}
		advanced += int_field(ans, "partitionsAdvanced");
		*released += int_field(ans, "segmentsReleased");
		apply_cursor_fixups(json_object_get(ans, "cursors"));
		json_decref(ans);
	}
	return advanced;
}

void
retention_run(struct dbconn *db)
{
	char batch[24], *text = NULL;
	const char *params[1] = { batch };
	json_t *ans;
	int64_t deleted, advanced, expired, released = 0;

	snprintf(batch, sizeof(batch), "%lld", (long long)qconf.retention_batch_size);
	atomic_fetch_add(&st_rounds, 1);
	atomic_store(&st_last_run_ms, wall_ms());
	if (db_exec_json(db, SQL_RETENTION_ROUND, params, &text) != QE_OK || !text) {
		atomic_fetch_add(&st_failed, 1);
		free(text);
		return;
	}
	ans = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(ans)) {
		log_warn("retention: unexpected answer from the database");
		atomic_fetch_add(&st_failed, 1);
		json_decref(ans);
		return;
	}
	if (json_is_true(json_object_get(ans, "skipped"))) {
		log_debug("retention: another broker is running the round");
		atomic_fetch_add(&st_skipped, 1);
		json_decref(ans);
		return;
	}
	deleted = int_field(ans, "segmentsDeleted");
	expired = int_field(ans, "dedupExpired");
	advanced = advance(db, json_object_get(ans, "advance"), &released);
	atomic_fetch_add(&st_segments, (uint64_t)deleted);
	atomic_fetch_add(&st_advanced, (uint64_t)advanced);
	atomic_fetch_add(&st_dedup, (uint64_t)expired);
	atomic_store(&st_last_segments, deleted);
	if (deleted || advanced || expired)
		log_debug("retention: %lld segments deleted, %lld partitions advanced "
			  "(%lld segments released), %lld dedup keys expired", (long long)deleted,
			  (long long)advanced, (long long)released, (long long)expired);
	json_decref(ans);
}

void
retention_stats_read(struct retention_stats *out)
{
	out->rounds = atomic_load(&st_rounds);
	out->skipped = atomic_load(&st_skipped);
	out->failed = atomic_load(&st_failed);
	out->segments_deleted = atomic_load(&st_segments);
	out->partitions_advanced = atomic_load(&st_advanced);
	out->dedup_expired = atomic_load(&st_dedup);
	out->last_run_ms = atomic_load(&st_last_run_ms);
	out->last_segments_deleted = atomic_load(&st_last_segments);
}
