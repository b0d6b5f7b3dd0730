/*
 * queen-bench phase "encrypt": what payload encryption costs a batch-100 push (SPEC 17
 * target: sealing 100 payloads costs the push at most 10% of its rate).  The same pushes
 * (1 KiB payloads, 10 partitions, 8 connections) go to a queue with encryptionEnabled and to
 * a plain one, in alternating slices so that both see the same machine; bench.sh gives the
 * broker a QUEEN_ENCRYPTION_KEY.
 *
 * Three comparisons.  "1k": the 1 KiB payload of the other phases, whose padding is the same
 * in every message: a plain segment of them compresses (LZ4) to a twentieth and stays in its
 * row, while ciphertext never compresses and goes to TOAST, so this ratio measures that
 * compression as much as the encryption.  "1k unique": padding of random hex drawn for each
 * message, as real payloads differ from each other; the target is judged on this one.  "1k
 * unique vs envelope size": the plain queue gets unique payloads as long as the envelopes of
 * the encrypted one, so PostgreSQL writes as many bytes for both and what is left is the
 * broker's sealing.  Each figure gives the plain rate of the same slices, the broker's CPU a
 * message, and with --pg the WAL and the stored payload bytes a message of each queue.
 * Then the read side: --drain-messages / 2 unique payloads in a plain and in an encrypted
 * queue, each drained by two groups in turn (4 consumers, pop 100 + ack), every pop opening
 * the envelopes of the encrypted one.
 */
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench.h"

#define ENC_SLICES 4

static bool encrypt_configure(const char *queue, struct failures *f)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;
	struct buf body = { 0 };
	int rc;

	buf_addf(&body, "{\"queue\":\"%s\",\"options\":{\"encryptionEnabled\":true}}", queue);
	rc = hc_call(&h, "POST", "/api/v1/configure", body.p, body.len, &r);
	buf_free(&body);
	if (rc < 0) {
		f->transport++;
		failures_note(f, "transport", "configure call lost", 19);
	} else if (r.status != 200) {
		fail_http(f, &r);
	}
	hc_free(&h);
	return rc >= 0 && r.status == 200;
}

/* One numeric value of a one-row query, or -1. */
static double pg_number(PGconn *pg, const char *sql, const char *param)
{
	PGresult *res;
	double v = -1;

	if (!pg)
		return -1;
	res = PQexecParams(pg, sql, param ? 1 : 0, NULL, param ? &param : NULL, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    !PQgetisnull(res, 0, 0))
		v = atof(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* The WAL position in bytes from 0/0. */
static double wal_at(PGconn *pg)
{
	return pg_number(pg, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')", NULL);
}

/* The stored size of the queue's segment payloads a message (compressed, TOAST included). */
static double stored_per_msg(PGconn *pg, const char *queue)
{
	return pg_number(pg, "SELECT sum(pg_column_size(s.payloads))::float8 / "
			 "nullif(sum(s.end_offset - s.base_offset + 1), 0) "
			 "FROM queen_segments s JOIN queen_partitions p ON p.id = s.partition_id "
			 "JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = $1", queue);
}

/* Alternating slices of pushes of pl to an encrypted queue and of plain_pl to a plain one;
 * prints the figures. */
static void encrypt_compare(PGconn *pg, const struct payload *pl, const struct payload *plain_pl,
			    const char *label)
{
	struct failures fail = { 0 };
	char queue[2][128], fig[64], note[128];
	double secs[2] = { 0, 0 }, cpu[2] = { 0, 0 }, wal[2] = { 0, 0 }, rate[2], us[2], wl[2];
	double stored[2];
	long queued[2] = { 0, 0 };
	bool cpu_ok = true, wal_ok = pg != NULL;

	for (int k = 0; k < 2; k++)
		snprintf(queue[k], sizeof(queue[k]), "bench-%s-%s-%s-b%d", run_id,
			 k ? "encrypted" : "plain", k ? pl->tag : plain_pl->tag, PUSH_BIG_BATCH);
	if (!encrypt_configure(queue[1], &fail)) {
		failures_print("push b100 encrypted", &fail);
		return;
	}
	for (int s = 0; s < 2 * ENC_SLICES; s++) {
		struct push_run ph = { 0 };
		struct cpu_mark m;
		double elapsed, us_slice, w0 = wal_at(pg), w1;
		int k = s % 2;

		ph.queue = queue[k];
		ph.batch = PUSH_BIG_BATCH;
		ph.nparts = 10;
		ph.pl = k ? pl : plain_pl;
		ph.to_send = -1;
		ph.stop_at = now() + opt.duration / ENC_SLICES;
		cpu_mark(&m);
		push_run(&ph, PUSH_BIG_CONNS, &elapsed);
		us_slice = cpu_us_per_msg(&m, ph.queued);
		w1 = wal_at(pg);
		queued[k] += ph.queued;
		secs[k] += elapsed;
		if (us_slice < 0)
			cpu_ok = false;
		else
			cpu[k] += us_slice * (double)ph.queued;
		if (w0 < 0 || w1 < 0)
			wal_ok = false;
		else
			wal[k] += w1 - w0;
		failures_print(k ? "push b100 encrypted" : "push b100 plain (encrypt phase)",
			       &ph.fail);
		free(ph.lat.v);
	}
	for (int k = 0; k < 2; k++) {
		rate[k] = secs[k] > 0 ? (double)queued[k] / secs[k] : 0;
		us[k] = queued[k] > 0 ? cpu[k] / (double)queued[k] : 0;
		wl[k] = queued[k] > 0 ? wal[k] / (double)queued[k] : 0;
		stored[k] = stored_per_msg(pg, queue[k]);
	}
	snprintf(fig, sizeof(fig), "push b100 %s encrypted 10p%s", label,
		 pl == plain_pl ? "" : " (envelope-size plain)");
	if (cpu_ok)
		snprintf(note, sizeof(note), "[plain %.0f msg/s in the same slices; broker cpu "
			 "%.1f vs %.1f us/msg]", rate[0], us[1], us[0]);
	else
		snprintf(note, sizeof(note), "[plain %.0f msg/s in the same slices]", rate[0]);
	figure(fig, rate[1], "msg/s", pl->base, note);
	snprintf(fig, sizeof(fig), "push b100 %s encrypted vs %splain", label,
		 pl == plain_pl ? "" : "envelope-size ");
	if (wal_ok && stored[0] >= 0 && stored[1] >= 0)
		snprintf(note, sizeof(note), "[PostgreSQL a message: WAL %.0f vs %.0f B, payload "
			 "stored %.0f vs %.0f B; target >= 0.90x]", wl[1], wl[0], stored[1],
			 stored[0]);
	else
		snprintf(note, sizeof(note), "[target >= 0.90x]");
	figure_ratio(fig, rate[1], rate[0], note);
}

/* Drains of a plain and an encrypted queue of pl in turn; prints the figure. */
static void encrypt_drain(const struct payload *pl)
{
	static const int order[4] = { 0, 1, 1, 0 };	/* neither always on the fuller database */
	struct failures fail = { 0 };
	char queue[2][128], group[128], label[96], note[128];
	long count = opt.drain_messages / 2, filled[2], acked[2] = { 0, 0 };
	double secs[2] = { 0, 0 }, cpu[2] = { 0, 0 }, rate[2], us[2], fill;
	bool cpu_ok = true;

	for (int k = 0; k < 2; k++)
		snprintf(queue[k], sizeof(queue[k]), "bench-%s-drain-%s-%s", run_id,
			 k ? "encrypted" : "plain", pl->tag);
	if (!encrypt_configure(queue[1], &fail)) {
		failures_print("drain encrypted", &fail);
		return;
	}
	for (int k = 0; k < 2; k++)
		filled[k] = push_fill(queue[k], 10, count, pl, k ? "encrypt drain prefill "
				      "encrypted" : "encrypt drain prefill plain", &fill);
	for (int s = 0; s < 4; s++) {
		struct pop_run ph = { 0 };
		struct cpu_mark m;
		double elapsed, us_run;
		int k = order[s];

		snprintf(group, sizeof(group), "bench-%s-g%d", run_id, s);
		ph.queue = queue[k];
		ph.group = group;
		ph.target = filled[k];
		pop_path(&ph.path, queue[k], group, false);
		cpu_mark(&m);
		pop_drain(&ph, POP_CONSUMERS, &elapsed);
		us_run = cpu_us_per_msg(&m, ph.acked);
		acked[k] += ph.acked;
		secs[k] += elapsed;
		if (us_run < 0)
			cpu_ok = false;
		else
			cpu[k] += us_run * (double)ph.acked;
		pop_check_empty(&ph);
		failures_print(k ? "drain encrypted" : "drain plain (encrypt phase)", &ph.fail);
		buf_free(&ph.path);
		free(ph.lat.v);
	}
	for (int k = 0; k < 2; k++) {
		rate[k] = secs[k] > 0 ? (double)acked[k] / secs[k] : 0;
		us[k] = acked[k] > 0 ? cpu[k] / (double)acked[k] : 0;
	}
	snprintf(label, sizeof(label), "drain b100 4c 10p %s encrypted",
		 strcmp(pl->tag, "1k-unique") == 0 ? "1k unique" : pl->tag);
	if (cpu_ok)
		snprintf(note, sizeof(note), "[plain %.0f msg/s: %.2fx; broker cpu %.1f vs %.1f "
			 "us/msg]", rate[0], rate[0] > 0 ? rate[1] / rate[0] : 0, us[1], us[0]);
	else
		snprintf(note, sizeof(note), "[plain %.0f msg/s: %.2fx]", rate[0],
			 rate[0] > 0 ? rate[1] / rate[0] : 0);
	figure(label, rate[1], "msg/s", pl->base, note);
}

/* The length of the envelope of SPEC 17 for a payload of len bytes:
 * {"encrypted":"<b64 of len>","iv":"<b64 of 12>","authTag":"<b64 of 16>"}. */
static size_t envelope_len(size_t len)
{
	return strlen("{\"encrypted\":\"\",\"iv\":\"\",\"authTag\":\"\"}") + 4 * ((len + 2) / 3) +
	       16 + 24;
}

void phase_encrypt(void)
{
	struct payload unique, sized;
	PGconn *pg = NULL;

	if (opt.pg) {
		pg = PQconnectdb(opt.pg);
		if (PQstatus(pg) != CONNECTION_OK) {
			fprintf(stderr, "encrypt: no WAL figures: %s", PQerrorMessage(pg));
			PQfinish(pg);
			pg = NULL;
		}
	}
	payload_init(&unique, payloads[1].len, "1k-unique", payloads[1].base);
	unique.unique = true;
	payload_init(&sized, envelope_len(payloads[1].len), "1k-envsize", payloads[1].base);
	sized.unique = true;
	encrypt_compare(pg, &payloads[1], &payloads[1], "1k");
	encrypt_compare(pg, &unique, &unique, "1k unique");
	encrypt_compare(pg, &unique, &sized, "1k unique");
	encrypt_drain(&unique);
	free(unique.text);
	free(sized.text);
	PQfinish(pg);
}
