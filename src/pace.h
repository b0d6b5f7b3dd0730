/* pace: large work yields the cores to small requests while they run.
 *
 * A push too large to share a group commit takes a core for a third of a second on a
 * two-core machine: its body arrives at loopback speed (the client's send and the broker's
 * receive, both at full tilt) and PostgreSQL stores it pass after pass. Small requests
 * beside it, which alone keep both cores busy, got half the machine and took three to four
 * times as long. While other requests run beside it (one began during its last step, or
 * one runs or waits for a worker), the large one goes in steps with pauses between them:
 * its body is read at most at PACE_RECV_BYTES_S (a slower sender is not held back at all),
 * and it is stored in short passes, each followed by a pause of PACE_PASS_FACTOR times the
 * pass. Alone, it runs at full speed.
 *
 * Thread context: pace_pause_us from any thread; pace_hold from libmicrohttpd's access
 * handler only (it suspends the connection there); a thread of its own resumes held
 * connections when their pause is over. */
#ifndef QUEEN_PACE_H
#define QUEEN_PACE_H

#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;

/* Pauses between the passes of a large push: this many times the pass's time. */
#define PACE_PASS_FACTOR 3
/* The passes of a large push carry at most this many payload bytes while it is paced. */
#define PACE_PASS_BYTES (256 * 1024)
/* A large body is read in steps of this many bytes ... */
#define PACE_RECV_STEP (256 * 1024)
/* ... at this rate at most, while it is paced (bytes a second). */
#define PACE_RECV_BYTES_S (128ull * 1024 * 1024)

int pace_start(void);
/* Resumes every held connection and stops the thread: call before the HTTP daemon stops. */
void pace_stop(void);

/* Taken when a step of large work begins: the steps after it are paced when another request
 * began since then, or runs or waits for a worker now. */
uint64_t pace_mark(void);
int pace_contended(uint64_t mark);

/* How long large work should pause before its next step, its last step having begun at mark
 * and taken worked_us: 0 when nothing else ran beside it. */
uint64_t pace_pause_us(uint64_t mark, uint64_t worked_us);

/* The pause that keeps a body's receipt at PACE_RECV_BYTES_S: `bytes` arrived over
 * `took_us` since mark; 0 when nothing else ran beside them or they came slower than that. */
uint64_t pace_recv_pause_us(uint64_t mark, size_t bytes, uint64_t took_us);

/* Sleeps us microseconds (a worker's or bulk thread's pause), counted in /metrics. */
void pace_sleep(uint64_t us);

/* Suspends conn (from its access handler) and resumes it after us microseconds. */
void pace_hold(struct MHD_Connection *conn, uint64_t us);

#endif
