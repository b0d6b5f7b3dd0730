/* timers: the sweeper. Every decision (which timers are due, who claims them, what a failure
 * costs) is queen_timers_fire's, under row locks; this file only bounds the work per sweep
 * and turns its answer into index updates and long-poll wakeups: one wake per queue that got
 * new messages, for as many partitions as it got them in. */
#include "timers.h"
#include "dbpool.h"
#include "http.h"
#include "log.h"
#include "longpoll.h"
#include "metrics.h"
#include "pindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t
timers_interval_ms(void)
{
	return TIMERS_INTERVAL_MS;
}

/* Applies one round's rows (ordered by queue, partition); returns the timers it claimed. */
static long
note_round(PGresult *res)
{
	struct lp_wakes wakes = LP_WAKES_INIT;
	struct pidx_pushes pushes = PIDX_PUSHES_INIT;
	uint64_t queued = 0, fired = 0;
	long claimed = 0;

	for (int row = 0; row < PQntuples(res); row++) {
		const char *q = PQgetvalue(res, row, 0);
		int nq = atoi(PQgetvalue(res, row, 5)), nf = atoi(PQgetvalue(res, row, 6));
		int nfail = atoi(PQgetvalue(res, row, 7)), ndead = atoi(PQgetvalue(res, row, 8));

		claimed += nf + nfail + ndead;
		queued += (uint64_t)nq;
		fired += (uint64_t)nf;
		if (nfail)
			log_warn("timers: %d deliveries to queue %s failed, retrying later",
				 nfail, q);
		if (ndead)
			log_warn("timers: %d timers of queue %s dead-lettered after 5 failed "
				 "deliveries", ndead, q);
		if (!PQgetisnull(res, row, 3) && !PQgetisnull(res, row, 4))
			pidx_pushed(&pushes, PQgetvalue(res, row, 2), q, PQgetvalue(res, row, 3),
				   PQgetvalue(res, row, 1), atoll(PQgetvalue(res, row, 4)));
		if (nq > 0)
			lp_wakes_add(&wakes, q, 1);
	}
	pidx_pushes_done(&pushes);
	lp_wakes_fire(&wakes);
	if (fired)
		metrics_pushed(queued, fired - queued);
	return claimed;
}

void
timers_sweep(struct dbconn *db)
{
	char limit[16];
	const char *params[1] = { limit };
	int64_t start = now_ms();

	snprintf(limit, sizeof(limit), "%d", TIMERS_ROUND);
	for (;;) {
		PGresult *res;
		long claimed;

		if (db_exec(db, SQL_TIMERS_FIRE, params, &res) != QE_OK)
			return;
		claimed = note_round(res);
		PQclear(res);
		if (claimed < TIMERS_ROUND || now_ms() - start >= TIMERS_SWEEP_BUDGET_MS)
			return;
	}
}
