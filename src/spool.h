/* spool: the on-disk push spool of FILE_BUFFER_DIR (SPEC 15) and its drainer.
 *
 * When PostgreSQL is unreachable (or maintenance mode diverts pushes) accepted push items are
 * appended to append-only segment files, seg-<20-digit sequence>.spool, and fsync'd before the
 * push is answered "buffered". A drainer (a task of the maintenance thread) replays them in
 * spool order through the push path once the database answers, and deletes a segment only
 * after every record in it is committed. While anything waits in the spool, new pushes go to
 * the spool too, so per-partition order is kept.
 *
 * Record: u32 magic "QSP1", u32 body length, u32 CRC-32C of (length, body), then the body:
 * u8 version (1), u8 flags (1 transactionId present, 2 traceId present, 0x80 sent: the push
 * reached the database before it was spooled), u16 zero, u64 wall ms of spooling, the
 * 36-character message id, then u32-length-prefixed strings: queue, partition,
 * [transactionId], [traceId], payload (JSON text). Integers are little-endian.
 *
 * Crash safety: a record is durable once its append returned (write + fdatasync); a crash
 * mid-append leaves a torn last record, which start-up detects (short header, length past the
 * end of the file, CRC mismatch) and drops with a warning, never half-replaying it. Damage in
 * the middle of a file (a record that fails its checksum, is cut short or is no record) loses
 * that record only: reading resumes at the next record whose marker and checksum are valid,
 * and start-up rewrites the file without the damaged bytes.
 *
 * Replay stores nothing twice. The message id is kept in the record. An item with a
 * transactionId carries it as its dedup key, and queen_spool_push (schema/functions/push.sql)
 * answers "duplicate" for an item whose key is already held by its own message id. An item
 * without one carries no key (a dedup row per item cost a replay more than its message did);
 * instead, wherever a replay may repeat a commit, the drainer asks queen_spool_stored
 * (schema/functions/spool.sql) whether each record's message id is in its partition and
 * leaves out those that are: records of the first segment found at start-up (the broker may
 * have stopped between a commit and that segment's removal), records of a batch whose replay failed
 * (a lane may have committed, or the commit may have gone through with its answer lost), and
 * records flagged "sent" (a push whose connection dropped after it was sent may have
 * committed without the broker knowing).
 *
 * Records the database refuses REPLAY_ATTEMPTS times with a statement error (the connection
 * being fine and the server the primary: a read-only or unreachable server is retried
 * without end, dbpool.h) are set aside in failed.spool, same format, for an operator:
 * failedCount.
 *
 * One broker per directory: a lock file (flock) refuses a second broker. Thread context:
 * spool_append from any worker, spool_drain from the maintenance thread; the counters and
 * flags from anywhere. */
#ifndef QUEEN_SPOOL_H
#define QUEEN_SPOOL_H

#include "errors.h"

#include <stddef.h>
#include <stdint.h>

struct push_item;
struct dbconn;

/* Opens dir (creating it and its parents), checks it can be written, takes its lock, and
 * recovers what a previous run left there (torn tails dropped with a warning). Call once at
 * start-up, before any push can arrive. Returns 0, or -1 with an error naming
 * FILE_BUFFER_DIR logged. */
int spool_open(const char *dir);
/* Closes the files; what is still spooled stays on disk for the next start. */
void spool_close(void);

/* 1 when pushes must be spooled instead of stored: maintenance mode is on, or records wait to
 * be drained (storing around them would reorder a partition). */
int spool_diverting(void);

/* Appends the n items (ids set, payload text) as one write and fsyncs it. sent: the items
 * were sent to the database, whose answer was lost with the connection (they may be stored
 * already; the drainer checks). On QE_OK every item is durable and has status "buffered" and
 * message_id = its id; on error (QE_DB: the disk is full or failing, the cause is logged)
 * none is in the spool and every item has status "failed" and error set: the push must be
 * answered 503, never "buffered". Any worker thread; appends are serialized. */
enum qe spool_append(struct push_item *const *items, size_t n, int sent);

/* Waits up to ms for the drainer to empty the spool. 1 when it is empty (pushes may go to
 * the database again without overtaking spooled items of their partitions), 0 on timeout or
 * in maintenance mode. A worker with a live connection calls it before spooling a push only
 * because the spool is not empty: pushes then wait briefly for the drainer instead of growing
 * the spool, so it empties while producers go on at their rate. Any worker thread. */
int spool_wait_drained(int64_t ms);

/* The drainer, a maintenance task: replays spooled records in order, in batches, through
 * h_push_store with their dedup keys, for up to a bounded time per call. Stops at once when
 * the connection is down (the next round retries) and while maintenance mode is on.
 * Maintenance thread only. */
void spool_drain(struct dbconn *db);
int64_t spool_drain_interval_ms(void);

/* 1 while the drainer replays: the spool is not empty, maintenance mode is off and its last
 * replay reached the database (while the database cannot be reached, pops and acks fail
 * side by side, never queued one behind another). The workers then run pops and acks one at
 * a time (workers.c), so that the replay gets the cores. Any thread. */
int spool_replaying(void);

/* Records in the spool not yet committed, and records set aside as failed. */
long spool_pending(void);
long spool_failed(void);

/* Maintenance mode (POST /api/v1/system/maintenance): every push goes to the spool, and the
 * drainer waits until it is switched off. In memory of this broker only. */
void spool_set_maintenance(int on);
int spool_maintenance(void);

/* CRC-32C (Castagnoli) of n bytes, continuing from crc (0 to start). Pure. It uses the
 * CPU's crc32 instruction where there is one; spool_crc32c_tables always takes the portable
 * way, which other machines use (the unit test checks both). */
uint32_t spool_crc32c(uint32_t crc, const void *buf, size_t n);
uint32_t spool_crc32c_tables(uint32_t crc, const void *buf, size_t n);

/* ---- the record format as pure functions over bytes (no I/O, no global state; safe on any
 * input, for a fuzzer as for recovery) ---- */

enum spool_rec_state {
	SPOOL_REC_OK,		/* a complete record with a valid checksum */
	SPOOL_REC_END,		/* no bytes */
	SPOOL_REC_TORN,		/* a header (or its start) whose body runs past the bytes */
	SPOOL_REC_BAD,		/* complete, but its checksum is wrong */
	SPOOL_REC_GARBAGE,	/* no record header here */
};

/* What the len bytes at buf start with; on SPOOL_REC_OK and SPOOL_REC_BAD *reclen is the
 * record's length, header included (0 otherwise). */
enum spool_rec_state spool_rec_check(const unsigned char *buf, size_t len, size_t *reclen);
/* Offset of the first valid record (SPOOL_REC_OK) at or after from in buf[0..len), or len. */
size_t spool_rec_resync(const unsigned char *buf, size_t len, size_t from);
/* Decodes the body (the len bytes after a record header) into *it: id, queue, partition,
 * txn, trace and payload (NUL-terminated copies in *mem, malloc'd: the caller frees it);
 * *flags gets the flag byte. Returns 0, or -1 (and *mem NULL) when the body is not a record
 * this version reads. */
int spool_rec_decode(const unsigned char *body, size_t len, struct push_item *it, char **mem,
		     unsigned *flags);

#endif
