/* spool: the push spool of FILE_BUFFER_DIR and its drainer (format and guarantees: spool.h).
 *
 * Key invariant: segs[] lists the segment files oldest first; only the last one can be open
 * for appends (wfd), and segs[i].size is the length of valid records that have been fsync'd:
 * nothing beyond it is ever read. The drainer reads segs[0] only, and only the drainer removes
 * it, after every record up to its size is committed. One mutex (mu) covers the list and the
 * counters. Appends go one at a time under a second one (wmu): each writes and fdatasyncs
 * without mu, then raises the size, so the drainer never sees a half-written record and never
 * waits for a disk flush; the segment being written to is not removed meanwhile (appending). */
#include "spool.h"
#include "dbpool.h"
#include "h_push.h"
#include "http.h"
#include "log.h"
#include "qassert.h"
#include "strbuf.h"
#include "uuid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SPOOL_MAGIC 0x31505351u		/* the bytes "QSP1", read little-endian */
#define REC_HDR 12			/* magic, body length, CRC-32C */
#define REC_FIXED 48			/* version, flags, zero, time, message id */
#define REC_VERSION 1
#define REC_MAX (1u << 30)		/* a longer body is corruption, not a record */
#define F_TXN 1
#define F_TRACE 2
#define F_SUB 4			/* producerSub (SPEC 17); records without it read as before */
#define F_SENT 0x80		/* sent to the database before it was spooled (spool.h) */
#define F_KNOWN (F_TXN | F_TRACE | F_SUB | F_SENT)

#define SEG_MAX_BYTES ((off_t)16 << 20)	/* a segment is sealed once it holds this much */
#define SEG_NAME_LEN 31			/* "seg-" 20 digits ".spool" and the NUL */
#define FAILED_NAME "failed.spool"
#define LOCK_NAME "queend.lock"

#define DRAIN_BATCH_ITEMS 1000		/* records replayed at once (queen_push takes 1000) */
#define DRAIN_BATCH_BYTES (4u << 20)
#define DRAIN_READ_MIN (64u << 10)	/* the smallest read of the segment file */
#define DRAIN_BUF_KEEP (16u << 20)	/* a larger read buffer is freed after its batch */
#define DRAIN_BUDGET_MS 500		/* a drain round stops starting batches after this */
#define DRAIN_INTERVAL_MS 200		/* between rounds while nothing is pending */
#define DRAIN_RETRY_MS 50		/* between rounds while records wait */
#define REPLAY_ATTEMPTS 5		/* refusals of one record before it is set aside */

/* The bytes of a segment file from `at` on that a drain batch has read: a few large reads a
 * batch, not two small ones a record. The memory (cap bytes) is kept from one batch to the
 * next while records wait: a buffer of a megabyte or more allocated afresh for each batch
 * is fresh pages, and the page faults of filling them cost more than the read itself. */
struct rdbuf {
	unsigned char *buf;
	size_t len;		/* bytes read, from at */
	size_t cap;
	off_t at;
};

struct seg {
	uint64_t seq;
	off_t size;		/* valid, durable bytes */
	long left;		/* records not yet committed by the drainer */
};

static struct {
	pthread_mutex_t mu;
	pthread_mutex_t wmu;	/* one append at a time; taken before mu */
	pthread_cond_t drained;	/* broadcast when nothing is pending any more */
	char *dir;
	int dirfd, lockfd;
	int wfd;		/* the last segment, open for appends, or -1 */
	int appending;		/* an append is writing to wfd without mu */
	struct seg *segs;
	size_t nsegs, cap;
	uint64_t next_seq;
	/* The drainer's position: maintenance thread only. */
	int rfd;
	uint64_t rseq;
	off_t rpos;
	int attempts;		/* refusals of the record at rpos */
	off_t single_until;	/* replay one record at a time up to here (a batch was refused) */
	off_t recheck_until;	/* up to here every record may be stored (a replay of its batch
				 * failed, perhaps after some commit): the replay asks, as for
				 * records flagged sent */
	uint64_t found_first;	/* the first segment found at start-up, 0 = none: the one a
				 * stopped broker was draining, so any record of it may be
				 * stored already (segments are drained in order, each removed
				 * once its last record is committed), and each is asked about */
	int64_t retry_at;	/* monotonic ms before which the refused record is not retried */
	size_t read_hint;	/* bytes the last batch took: the first read of the next */
	struct rdbuf rd;	/* the drainer's read buffer, kept while records wait */
} sp = {
	.mu = PTHREAD_MUTEX_INITIALIZER, .wmu = PTHREAD_MUTEX_INITIALIZER, .drained = PTHREAD_COND_INITIALIZER, .dirfd = -1, .lockfd = -1, .wfd = -1, .rfd = -1,
};

static _Atomic long sp_pending, sp_failed;
static _Atomic int sp_maint;
static _Atomic int sp_busy;	/* the last drain round stopped with records left to replay */
static _Atomic int sp_reached = 1;	/* the drainer's last replay reached the database */

/* Counts k records as gone from the spool (committed, set aside or lost). Under mu. */
static void
pending_sub(long k)
{
	if (k > 0 && atomic_fetch_sub(&sp_pending, k) == k) {
		log_warn("spool: drained, pushes are stored directly again");
		pthread_cond_broadcast(&sp.drained);
	}
}

/* ---- CRC-32C, little-endian fields -------------------------------------------------- */

/* Two ways to the same CRC: the CPU's crc32 instruction (x86-64 with SSE 4.2), eight bytes
 * an instruction, and elsewhere tables sliced by 8 (crc_table[k][b] is the CRC of byte b
 * followed by k zero bytes, so eight bytes take eight lookups and one step). The drainer
 * checks every byte it replays; an append, every byte it writes. Both take and return the
 * CRC register (inverted). */
static uint32_t crc_table[8][256];
static uint32_t (*crc_run)(uint32_t reg, const unsigned char *p, size_t n);
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static uint32_t get32(const unsigned char *p);

static uint32_t
crc_by_tables(uint32_t reg, const unsigned char *p, size_t n)
{
	for (; n >= 8; n -= 8, p += 8) {
		uint32_t lo = reg ^ get32(p), hi = get32(p + 4);

		reg = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
	}
	while (n--)
		reg = crc_table[0][(reg ^ *p++) & 0xff] ^ (reg >> 8);
	return reg;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc_by_cpu(uint32_t reg, const unsigned char *p, size_t n)
{
	uint64_t r = reg;

	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;

		memcpy(&w, p, 8);	/* little-endian, like the tables' get32 */
		r = __builtin_ia32_crc32di(r, w);
	}
	reg = (uint32_t)r;
	while (n--)
		reg = __builtin_ia32_crc32qi(reg, *p++);
	return reg;
}
#endif

static void
crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (int k = 1; k < 8; k++)
		for (uint32_t i = 0; i < 256; i++)
			crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^
					  crc_table[0][crc_table[k - 1][i] & 0xff];
	crc_run = crc_by_tables;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		crc_run = crc_by_cpu;
#endif
}

uint32_t
spool_crc32c(uint32_t crc, const void *buf, size_t n)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_run(~crc, buf, n);
}

uint32_t
spool_crc32c_tables(uint32_t crc, const void *buf, size_t n)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_by_tables(~crc, buf, n);
}

static void
put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void
put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t
rec_crc(const unsigned char *lenbytes, const unsigned char *body, uint32_t len)
{
	return spool_crc32c(spool_crc32c(0, lenbytes, 4), body, len);
}

/* ---- records -------------------------------------------------------------------------- */

static void
add_str(struct strbuf *sb, const char *s)
{
	unsigned char n[4];
	size_t len = strlen(s);

	put32(n, (uint32_t)len);
	sb_add(sb, (const char *)n, 4);
	sb_add(sb, s, len);
}

/* Appends the record of one item (header, body) to sb. -1 when it would be too long. */
static int
rec_encode(struct strbuf *sb, const struct push_item *it, int64_t spooled_ms, int sent)
{
	size_t h = sb->len, body;
	unsigned char fixed[12];
	unsigned char *p;
	uint32_t len;

	if (strlen(it->payload) + strlen(it->queue) + strlen(it->partition) +
	    (it->txn ? strlen(it->txn) : 0) + (it->trace ? strlen(it->trace) : 0) +
	    (it->sub ? strlen(it->sub) : 0) >
	    REC_MAX - REC_FIXED - 64)
		return -1;
	sb_add(sb, "\0\0\0\0\0\0\0\0\0\0\0\0", REC_HDR);
	body = sb->len;
	fixed[0] = REC_VERSION;
	fixed[1] = (unsigned char)((it->txn ? F_TXN : 0) | (it->trace ? F_TRACE : 0) |
				   (it->sub ? F_SUB : 0) | (sent ? F_SENT : 0));
	fixed[2] = fixed[3] = 0;
	put64(fixed + 4, (uint64_t)spooled_ms);
	sb_add(sb, (const char *)fixed, sizeof(fixed));
	QASSERT(strlen(it->id) == 36);
	sb_add(sb, it->id, 36);
	add_str(sb, it->queue);
	add_str(sb, it->partition);
	if (it->txn)
		add_str(sb, it->txn);
	if (it->trace)
		add_str(sb, it->trace);
	if (it->sub)
		add_str(sb, it->sub);
	add_str(sb, it->payload);
	QASSERT(sb->len - body < REC_MAX);
	len = (uint32_t)(sb->len - body);
	p = (unsigned char *)sb->buf + h;
	put32(p, SPOOL_MAGIC);
	put32(p + 4, len);
	put32(p + 8, rec_crc(p + 4, p + REC_HDR, len));
	return 0;
}

/* A record read back: the item (strings point into mem, payload included), its body (in the
 * batch's read buffer, at boff) and its flags. */
struct rec {
	struct push_item it;
	char *mem;
	const unsigned char *body;
	size_t boff;
	uint32_t len;
	unsigned flags;
};

static void
rec_clear(struct rec *r)
{
	free(r->mem);
	memset(r, 0, sizeof(*r));
}

/* Copies the length-prefixed string at *pos of b into *out (NUL-terminated); 0 or -1. */
static int
take_str(const unsigned char *b, size_t len, size_t *pos, char **out, const char **dst)
{
	uint32_t n;

	if (len - *pos < 4)
		return -1;
	n = get32(b + *pos);
	*pos += 4;
	if (n > len - *pos || memchr(b + *pos, '\0', n))
		return -1;
	memcpy(*out, b + *pos, n);
	(*out)[n] = '\0';
	*dst = *out;
	*out += n + 1;
	*pos += n;
	return 0;
}

int
spool_rec_decode(const unsigned char *b, size_t len, struct push_item *it, char **mem,
		 unsigned *flags)
{
	size_t pos = REC_FIXED;
	const char *payload;
	char *out;

	*mem = NULL;
	memset(it, 0, sizeof(*it));
	if (len < REC_FIXED || len >= REC_MAX || b[0] != REC_VERSION || (b[1] & ~F_KNOWN))
		return -1;
	*flags = b[1];
	memcpy(it->id, b + 12, 36);
	it->id[36] = '\0';
	if (!uuid_valid(it->id))
		return -1;
	*mem = malloc(len + 8);
	QASSERT(*mem != NULL);
	out = *mem;
	if (take_str(b, len, &pos, &out, &it->queue) < 0 ||
	    take_str(b, len, &pos, &out, &it->partition) < 0 ||
	    ((b[1] & F_TXN) && take_str(b, len, &pos, &out, &it->txn) < 0) ||
	    ((b[1] & F_TRACE) && take_str(b, len, &pos, &out, &it->trace) < 0) ||
	    ((b[1] & F_SUB) && take_str(b, len, &pos, &out, &it->sub) < 0) ||
	    take_str(b, len, &pos, &out, &payload) < 0 || pos != len || !it->queue[0] ||
	    !it->partition[0]) {
		free(*mem);
		*mem = NULL;
		return -1;
	}
	it->payload = (char *)payload;
	return 0;
}

/* Fills r->it from r->body. 0, or -1 when the body is not a record this version reads. */
static int
rec_decode(struct rec *r)
{
	return spool_rec_decode(r->body, r->len, &r->it, &r->mem, &r->flags);
}

/* What a record header of avail bytes (avail >= REC_HDR) says: GARBAGE when it is not one,
 * TORN when its body runs past avail, else OK with the body length in *len. */
static enum spool_rec_state
hdr_check(const unsigned char *h, size_t avail, uint32_t *len)
{
	*len = get32(h + 4);
	if (get32(h) != SPOOL_MAGIC || *len >= REC_MAX)
		return SPOOL_REC_GARBAGE;
	if ((size_t)*len > avail - REC_HDR)
		return SPOOL_REC_TORN;
	return SPOOL_REC_OK;
}

enum spool_rec_state
spool_rec_check(const unsigned char *buf, size_t len, size_t *reclen)
{
	enum spool_rec_state st;
	uint32_t body;

	*reclen = 0;
	if (len == 0)
		return SPOOL_REC_END;
	if (len < REC_HDR)
		return SPOOL_REC_TORN;
	st = hdr_check(buf, len, &body);
	if (st != SPOOL_REC_OK)
		return st;
	*reclen = REC_HDR + (size_t)body;
	return rec_crc(buf + 4, buf + REC_HDR, body) == get32(buf + 8) ? SPOOL_REC_OK
									 : SPOOL_REC_BAD;
}

size_t
spool_rec_resync(const unsigned char *buf, size_t len, size_t from)
{
	static const unsigned char magic[4] = { 'Q', 'S', 'P', '1' };

	while (from < len) {
		const unsigned char *m = memmem(buf + from, len - from, magic, 4);
		size_t at, reclen;

		if (!m)
			break;
		at = (size_t)(m - buf);
		if (spool_rec_check(buf + at, len - at, &reclen) == SPOOL_REC_OK)
			return at;
		from = at + 1;
	}
	return len;
}

static int
pread_all(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;

	while (n) {
		ssize_t k = pread(fd, p, n, off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;	/* the file shrank under us */
			return -1;
		}
		p += k;
		n -= (size_t)k;
		off += k;
	}
	return 0;
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Makes rb hold the n bytes at pos (pos >= rb->at; fewer when the valid bytes end first, at
 * end), reading ahead: at first what the last batch took, then twice what it holds. 0, or -1
 * on a read error. The buffer may move. */
static int
rd_have(struct rdbuf *rb, int fd, off_t pos, size_t n, off_t end)
{
	size_t need = (size_t)(pos - rb->at) + n, most = (size_t)(end - rb->at), want;

	if (need > most)
		need = most;
	if (need <= rb->len)
		return 0;
	want = rb->len ? 2 * rb->len : sp.read_hint;
	if (want < DRAIN_READ_MIN)
		want = DRAIN_READ_MIN;
	if (want < need)
		want = need;
	if (want > most)
		want = most;
	if (want > rb->cap) {
		unsigned char *b = realloc(rb->buf, want);

		QASSERT(b != NULL);
		rb->buf = b;
		rb->cap = want;
	}
	if (pread_all(fd, rb->buf + rb->len, want - rb->len, rb->at + (off_t)rb->len) < 0)
		return -1;
	rb->len = want;
	return 0;
}

/* Reads the record at pos of fd, whose valid bytes end at end, into rb: its body is at *boff
 * of rb->buf, *len bytes. REC_IOERR on a read error. */
#define REC_IOERR ((enum spool_rec_state)(SPOOL_REC_GARBAGE + 1))
static enum spool_rec_state
rec_read(struct rdbuf *rb, int fd, off_t pos, off_t end, size_t *boff, uint32_t *len)
{
	enum spool_rec_state st;
	const unsigned char *h;

	*boff = 0;
	*len = 0;
	if (pos >= end)
		return SPOOL_REC_END;
	if (end - pos < REC_HDR)
		return SPOOL_REC_TORN;
	if (rd_have(rb, fd, pos, REC_HDR, end) < 0)
		return REC_IOERR;
	st = hdr_check(rb->buf + (pos - rb->at), (size_t)(end - pos), len);
	if (st != SPOOL_REC_OK)
		return st;
	if (rd_have(rb, fd, pos, REC_HDR + (size_t)*len, end) < 0)
		return REC_IOERR;
	h = rb->buf + (pos - rb->at);
	if (rec_crc(h + 4, h + REC_HDR, *len) != get32(h + 8))
		return SPOOL_REC_BAD;
	*boff = (size_t)(pos - rb->at) + REC_HDR;
	return SPOOL_REC_OK;
}

/* ---- files ---------------------------------------------------------------------------- */

static void
seg_name(char name[SEG_NAME_LEN], uint64_t seq)
{
	snprintf(name, SEG_NAME_LEN, "seg-%020llu.spool", (unsigned long long)seq);
}

/* Sequence number of a segment file name, or 0 when it is not one. */
static uint64_t
seg_parse(const char *name)
{
	uint64_t seq = 0;

	if (strlen(name) != SEG_NAME_LEN - 1 || strncmp(name, "seg-", 4) != 0 ||
	    strcmp(name + 24, ".spool") != 0)
		return 0;
	for (int i = 4; i < 24; i++) {
		if (name[i] < '0' || name[i] > '9')
			return 0;
		seq = seq * 10 + (uint64_t)(name[i] - '0');
	}
	return seq;
}

static int
mkdir_p(const char *dir)
{
	char *p = strdup(dir);
	struct stat st;
	int rc = 0;

	QASSERT(p != NULL);
	for (char *s = p + 1; *s && rc == 0; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0750) < 0 && errno != EEXIST)
			rc = -1;
		*s = '/';
	}
	if (rc == 0 && mkdir(p, 0750) < 0 && errno != EEXIST)
		rc = -1;
	if (rc == 0 && stat(p, &st) < 0)
		rc = -1;
	if (rc == 0 && !S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		rc = -1;
	}
	free(p);
	return rc;
}

/* Replaces segment name by the valid records of buf[0..len) (all in one write, synced, then
 * renamed over it). 0, or -1 with errno. */
static int
rewrite_file(const char *name, const unsigned char *buf, size_t len)
{
	static const char tmp[] = ".rewrite";
	int fd = openat(sp.dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), err;

	if (fd < 0)
		return -1;
	if (write_all(fd, (const char *)buf, len) < 0 || fsync(fd) < 0 ||
	    renameat(sp.dirfd, tmp, sp.dirfd, name) < 0 || fsync(sp.dirfd) < 0) {
		err = errno;
		close(fd);
		unlinkat(sp.dirfd, tmp, 0);
		errno = err;
		return -1;
	}
	close(fd);
	return 0;
}

/* Reads the whole file of fd into *buf (malloc'd; its length in *len). 0 or -1. */
static int
read_file(int fd, unsigned char **buf, size_t *len)
{
	struct stat st;

	*buf = NULL;
	*len = 0;
	if (fstat(fd, &st) < 0)
		return -1;
	*buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	QASSERT(*buf != NULL);
	if (st.st_size && pread_all(fd, *buf, (size_t)st.st_size, 0) < 0) {
		free(*buf);
		*buf = NULL;
		return -1;
	}
	*len = (size_t)st.st_size;
	return 0;
}

/* Validates a spool file left by a previous run and counts its records. Damage is passed
 * over, never a reason to drop what follows: from a record that fails its checksum, is cut
 * short or is no record at all, reading resumes at the next valid record (found by its
 * marker and checksum), so a damaged record loses that record only. A file damaged in the
 * middle is rewritten with its valid records; damage at the tail (a write cut short by a
 * crash) is cut off. Returns 0, or -1 on an I/O error. */
static int
scan_file(int fd, const char *name, off_t *size, long *records)
{
	unsigned char *buf;
	size_t len, pos = 0, kept = 0, holes = 0;
	long n = 0;
	int rc = 0;

	if (read_file(fd, &buf, &len) < 0)
		return -1;
	while (pos < len) {
		size_t reclen, next;
		enum spool_rec_state st = spool_rec_check(buf + pos, len - pos, &reclen);

		if (st == SPOOL_REC_OK) {
			/* Valid records move down over the holes before them (memmove: in place). */
			if (kept != pos)
				memmove(buf + kept, buf + pos, reclen);
			kept += reclen;
			pos += reclen;
			n++;
			continue;
		}
		next = spool_rec_resync(buf, len, pos + 1);
		if (next == len) {
			log_warn("spool: %s/%s: dropped a %s record at the tail (byte %zu, %zu bytes): "
				 "a write cut short by a crash", sp.dir, name,
				 st == SPOOL_REC_BAD ? "corrupt" : "torn", pos, len - pos);
			break;
		}
		if (st == SPOOL_REC_BAD && pos + reclen == next)
			log_error("spool: %s/%s: the record at byte %zu fails its checksum: skipped, "
				  "the records after it are kept; one buffered push is lost", sp.dir,
				  name, pos);
		else
			log_error("spool: %s/%s: bytes %zu to %zu hold no valid record: skipped, the "
				  "records after them are kept; a buffered push is lost", sp.dir,
				  name, pos, next);
		holes++;
		pos = next;
	}
	if (holes && rewrite_file(name, buf, kept) < 0) {
		log_error("spool: %s/%s: cannot rewrite it without its damaged bytes: %s", sp.dir,
			  name, strerror(errno));
		rc = -1;
	} else if (!holes && kept < len && (ftruncate(fd, (off_t)kept) < 0 || fsync(fd) < 0)) {
		log_warn("spool: %s/%s: cannot cut the tail off: %s (ignored when read)", sp.dir,
			 name, strerror(errno));
	}
	free(buf);
	*size = (off_t)kept;
	*records = n;
	return rc;
}

static void
segs_push(uint64_t seq, off_t size, long left)
{
	if (sp.nsegs == sp.cap) {
		sp.cap = sp.cap ? sp.cap * 2 : 16;
		sp.segs = realloc(sp.segs, sp.cap * sizeof(*sp.segs));
		QASSERT(sp.segs != NULL);
	}
	sp.segs[sp.nsegs].seq = seq;
	sp.segs[sp.nsegs].size = size;
	sp.segs[sp.nsegs].left = left;
	sp.nsegs++;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Loads the segments a previous run left (oldest first) and counts failed.spool. */
static int
recover(void)
{
	uint64_t *seqs = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	fd = dup(sp.dirfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		uint64_t seq = seg_parse(de->d_name);

		if (!seq)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			seqs = realloc(seqs, cap * sizeof(*seqs));
			QASSERT(seqs != NULL);
		}
		seqs[n++] = seq;
	}
	closedir(d);
	if (n)
		qsort(seqs, n, sizeof(*seqs), cmp_u64);
	sp.next_seq = n ? seqs[n - 1] + 1 : 1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char name[SEG_NAME_LEN];
		off_t size;
		long records;

		seg_name(name, seqs[i]);
		fd = openat(sp.dirfd, name, O_RDWR | O_CLOEXEC);
		if (fd < 0 || scan_file(fd, name, &size, &records) < 0) {
			log_error("FILE_BUFFER_DIR %s: cannot read %s: %s", sp.dir, name,
				  strerror(errno));
			rc = -1;
		} else if (records == 0) {
			unlinkat(sp.dirfd, name, 0);
		} else {
			segs_push(seqs[i], size, records);
			atomic_fetch_add(&sp_pending, records);
		}
		if (fd >= 0)
			close(fd);
	}
	free(seqs);
	if (rc < 0)
		return -1;
	fd = openat(sp.dirfd, FAILED_NAME, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		off_t size;
		long records = 0;

		if (scan_file(fd, FAILED_NAME, &size, &records) == 0)
			atomic_store(&sp_failed, records);
		close(fd);
	}
	return 0;
}

int
spool_open(const char *dir)
{
	int fd;

	QASSERT(sp.dirfd < 0);
	pthread_once(&crc_once, crc_init);
	sp.dir = strdup(dir);
	QASSERT(sp.dir != NULL);
	if (!dir[0] || mkdir_p(dir) < 0) {
		log_error("FILE_BUFFER_DIR %s: cannot create the spool directory: %s", dir,
			  dir[0] ? strerror(errno) : "empty path");
		goto fail;
	}
	sp.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp.dirfd < 0) {
		log_error("FILE_BUFFER_DIR %s: cannot open the spool directory: %s", dir,
			  strerror(errno));
		goto fail;
	}
	sp.lockfd = openat(sp.dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (sp.lockfd < 0) {
		log_error("FILE_BUFFER_DIR %s is not writable: %s", dir, strerror(errno));
		goto fail;
	}
	if (flock(sp.lockfd, LOCK_EX | LOCK_NB) < 0) {
		log_error("FILE_BUFFER_DIR %s is in use by another queend (%s): give each broker "
			  "its own", dir, strerror(errno));
		goto fail;
	}
	/* Writable for real: create, write, sync and remove a file. */
	fd = openat(sp.dirfd, ".probe", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write_all(fd, "q", 1) < 0 || fsync(fd) < 0 ||
	    unlinkat(sp.dirfd, ".probe", 0) < 0) {
		log_error("FILE_BUFFER_DIR %s is not writable: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	if (recover() < 0)
		goto fail;
	sp.found_first = sp.nsegs ? sp.segs[0].seq : 0;
	if (atomic_load(&sp_pending) > 0)
		log_warn("spool: %ld buffered pushes found in %s: they are stored as soon as the "
			 "database answers", atomic_load(&sp_pending), dir);
	if (atomic_load(&sp_failed) > 0)
		log_warn("spool: %s/%s holds %ld pushes the database refused", dir, FAILED_NAME,
			 atomic_load(&sp_failed));
	return 0;
fail:
	spool_close();
	return -1;
}

void
spool_close(void)
{
	pthread_mutex_lock(&sp.wmu);
	pthread_mutex_lock(&sp.mu);
	if (sp.wfd >= 0)
		close(sp.wfd);
	if (sp.rfd >= 0)
		close(sp.rfd);
	if (sp.lockfd >= 0)
		close(sp.lockfd);
	if (sp.dirfd >= 0)
		close(sp.dirfd);
	sp.wfd = sp.rfd = sp.lockfd = sp.dirfd = -1;
	free(sp.segs);
	sp.segs = NULL;
	sp.nsegs = sp.cap = 0;
	free(sp.dir);
	sp.dir = NULL;
	free(sp.rd.buf);
	sp.rd = (struct rdbuf){ 0 };
	atomic_store(&sp_pending, 0);
	atomic_store(&sp_failed, 0);
	pthread_mutex_unlock(&sp.mu);
	pthread_mutex_unlock(&sp.wmu);
}

/* ---- appending ------------------------------------------------------------------------ */

/* Opens a new segment for appends. Under mu. 0, or -1 with errno. */
static int
open_segment(void)
{
	char name[SEG_NAME_LEN];
	uint64_t seq = sp.next_seq++;
	int fd, err;

	seg_name(name, seq);
	fd = openat(sp.dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	/* The new name must survive a crash as surely as the records written into it. */
	if (fsync(sp.dirfd) < 0) {
		err = errno;
		close(fd);
		unlinkat(sp.dirfd, name, 0);
		errno = err;
		return -1;
	}
	segs_push(seq, 0, 0);
	sp.wfd = fd;
	return 0;
}

/* Stops appending to the last segment; removes it when it holds nothing. Under mu. */
static void
seal_segment(void)
{
	struct seg *s = &sp.segs[sp.nsegs - 1];

	close(sp.wfd);
	sp.wfd = -1;
	if (s->size == 0 && s->left == 0) {
		char name[SEG_NAME_LEN];

		seg_name(name, s->seq);
		unlinkat(sp.dirfd, name, 0);
		sp.nsegs--;
	}
}

enum qe
spool_append(struct push_item *const *items, size_t n, int sent)
{
	struct strbuf sb;
	int64_t now = wall_ms();
	int err = 0;

	sb_init(&sb);
	for (size_t i = 0; i < n && !err; i++)
		if (rec_encode(&sb, items[i], now, sent) < 0)
			err = EFBIG;
	pthread_mutex_lock(&sp.wmu);
	pthread_mutex_lock(&sp.mu);
	if (!err && sp.dirfd < 0)
		err = EBADF;
	if (!err && sp.wfd >= 0 && sp.segs[sp.nsegs - 1].size >= SEG_MAX_BYTES)
		seal_segment();
	if (!err && sp.wfd < 0 && open_segment() < 0)
		err = errno;
	if (!err) {
		int fd = sp.wfd;
		struct seg *s;

		/* Under wmu no other append moves wfd or the last segment's size, and with
		 * appending set the drainer does not remove the segment. */
		sp.appending = 1;
		pthread_mutex_unlock(&sp.mu);
		if (write_all(fd, sb.buf, sb.len) < 0 || fdatasync(fd) < 0)
			err = errno;
		pthread_mutex_lock(&sp.mu);
		sp.appending = 0;
		s = &sp.segs[sp.nsegs - 1];

		if (err) {
			/* Nothing of this append counts; later appends go to a new segment, so
			 * whatever the cut leaves behind is a tail that start-up drops. */
			if (ftruncate(sp.wfd, s->size) < 0)
				log_warn("spool: cannot cut a failed append off: %s",
					 strerror(errno));
			seal_segment();
		} else {
			s->size += (off_t)sb.len;
			s->left += (long)n;
			if (atomic_fetch_add(&sp_pending, (long)n) == 0)
				log_warn("spool: pushes now go to %s (%s)", sp.dir,
					 atomic_load(&sp_maint) ? "maintenance mode" :
					 "database unreachable");
		}
	}
	pthread_mutex_unlock(&sp.mu);
	pthread_mutex_unlock(&sp.wmu);
	sb_free(&sb);
	for (size_t i = 0; i < n; i++) {
		struct push_item *it = items[i];

		if (err) {
			it->status = "failed";
			it->error = "database unavailable and the spool could not store the item";
		} else {
			it->status = "buffered";
		}
		snprintf(it->message_id, sizeof(it->message_id), "%s", it->id);
	}
	if (err) {
		log_error("spool: cannot append %zu pushes to FILE_BUFFER_DIR %s: %s", n,
			  sp.dir ? sp.dir : "(not open)", strerror(err));
		return QE_DB;
	}
	return QE_OK;
}

int
spool_wait_drained(int64_t ms)
{
	struct timespec until;
	int drained;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&sp.mu);
	while (atomic_load(&sp_pending) > 0 && !atomic_load(&sp_maint) &&
	       pthread_cond_timedwait(&sp.drained, &sp.mu, &until) == 0)
		;
	drained = atomic_load(&sp_pending) == 0 && !atomic_load(&sp_maint);
	pthread_mutex_unlock(&sp.mu);
	return drained;
}

/* ---- draining ------------------------------------------------------------------------- */

/* Removes segs[0], whose records are all committed (or lost to damage). Under mu. */
static void
drop_first(void)
{
	char name[SEG_NAME_LEN];
	struct seg *s = &sp.segs[0];

	if (sp.nsegs == 1 && sp.wfd >= 0) {
		close(sp.wfd);
		sp.wfd = -1;
	}
	if (s->left > 0) {
		log_error("spool: %ld buffered pushes of a damaged segment are lost", s->left);
		pending_sub(s->left);
	}
	seg_name(name, s->seq);
	if (unlinkat(sp.dirfd, name, 0) < 0 && errno != ENOENT)
		log_error("spool: cannot remove %s/%s: %s (its pushes will be replayed again, "
			  "as duplicates)", sp.dir, name, strerror(errno));
	memmove(sp.segs, sp.segs + 1, (sp.nsegs - 1) * sizeof(*sp.segs));
	sp.nsegs--;
	if (sp.rfd >= 0)
		close(sp.rfd);
	sp.rfd = -1;
	sp.rpos = 0;
	sp.attempts = 0;
	sp.single_until = 0;
	sp.recheck_until = 0;
}

/* segs[0] is done, every record up to its size committed: removes it, unless an append is
 * writing to it now (then its records are the drainer's next). Under mu. 1 when removed. */
static int
seg_done(void)
{
	if (sp.appending && sp.nsegs == 1 && sp.wfd >= 0)
		return 0;
	drop_first();
	return 1;
}

/* Counts k records of segment seq as committed, the drainer being at pos now; removes the
 * segment when that was its last record. */
static void
committed(uint64_t seq, long k, off_t pos)
{
	pthread_mutex_lock(&sp.mu);
	if (sp.nsegs && sp.segs[0].seq == seq) {
		if (k > sp.segs[0].left)
			k = sp.segs[0].left;
		sp.segs[0].left -= k;
		pending_sub(k);
		sp.rpos = pos;
		sp.attempts = 0;
		/* At the durable end, the segment is done. */
		if (pos >= sp.segs[0].size)
			seg_done();
	}
	pthread_mutex_unlock(&sp.mu);
}

/* Appends a record the database keeps refusing to failed.spool. 0 or -1. */
static int
set_aside(const struct rec *r)
{
	unsigned char h[REC_HDR];
	int fd, rc = -1;

	put32(h, SPOOL_MAGIC);
	put32(h + 4, r->len);
	put32(h + 8, rec_crc(h + 4, r->body, r->len));
	fd = openat(sp.dirfd, FAILED_NAME, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0 && write_all(fd, (const char *)h, REC_HDR) == 0 &&
	    write_all(fd, (const char *)r->body, r->len) == 0 && fdatasync(fd) == 0)
		rc = 0;
	if (rc < 0)
		log_error("spool: cannot write %s/%s: %s", sp.dir, FAILED_NAME, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Of the k records of a batch, those sent to the database before they were spooled may be
 * stored already (the connection dropped between commit and answer), and with all every one
 * may (a replay of the batch failed after some lane committed, or the broker stopped between
 * a commit and the removal of the segment): asks the database
 * (queen_spool_stored) and sets those to "duplicate", moving the others to the front of
 * items. *asked: whether any record may be stored (and was asked about). Returns how many are
 * left to push, or -1 when the database cannot be asked. */
static long
leave_out_stored(struct dbconn *db, struct rec *recs, struct push_item **items, size_t k,
		 int all, int *asked)
{
	struct strbuf sb[3];
	const char *params[4];
	char now[24];
	size_t *at = calloc(k, sizeof(*at)), n = 0, left = 0;
	PGresult *res = NULL;
	enum qe e;

	QASSERT(at != NULL);
	for (int m = 0; m < 3; m++) {
		sb_init(&sb[m]);
		sb_addc(&sb[m], '{');
	}
	for (size_t i = 0; i < k; i++) {
		if (!all && !(recs[i].flags & F_SENT))
			continue;
		for (int m = 0; m < 3; m++)
			if (n)
				sb_addc(&sb[m], ',');
		sb_add_pgelem(&sb[0], recs[i].it.queue);
		sb_add_pgelem(&sb[1], recs[i].it.partition);
		sb_add_pgelem(&sb[2], recs[i].it.id);
		at[n++] = i;
	}
	for (int m = 0; m < 3; m++) {
		sb_addc(&sb[m], '}');
		params[m] = sb[m].buf;
	}
	snprintf(now, sizeof(now), "%lld", (long long)wall_ms());	/* the ids' clock */
	params[3] = now;
	*asked = n > 0;
	e = n ? db_exec(db, SQL_SPOOL_STORED, params, &res) : QE_OK;
	for (int m = 0; m < 3; m++)
		sb_free(&sb[m]);
	if (e != QE_OK) {
		free(at);
		return -1;
	}
	for (int row = 0; res && row < PQntuples(res); row++) {
		long j = atol(PQgetvalue(res, row, 0));
		struct push_item *it;

		if (j < 0 || (size_t)j >= n)
			continue;
		it = &recs[at[j]].it;
		it->status = "duplicate";
		snprintf(it->message_id, sizeof(it->message_id), "%s", it->id);
	}
	PQclear(res);
	free(at);
	for (size_t i = 0; i < k; i++)
		if (!recs[i].it.status)
			items[left++] = &recs[i].it;
	return (long)left;
}

/* Offset of the first valid record after pos in the file fd of valid length size, or size
 * (also when it cannot be read). */
static off_t
resync_at(int fd, off_t pos, off_t size)
{
	size_t len = (size_t)(size - pos);
	unsigned char *buf = malloc(len ? len : 1);
	off_t next = size;

	QASSERT(buf != NULL);
	if (pread_all(fd, buf, len, pos) == 0)
		next = pos + (off_t)spool_rec_resync(buf, len, 1);
	free(buf);
	return next;
}

/* One batch of the drainer. Returns 1 to go on, 0 to stop this round. */
static int
drain_step(struct dbconn *db)
{
	struct rec *recs;
	struct push_item **items;
	struct rdbuf *rb = &sp.rd;
	uint64_t seq;
	off_t size, pos;
	size_t k = 0, bytes = 0, max;
	enum spool_rec_state st = SPOOL_REC_OK;
	int go_on = 1, unreadable = 0, refused = 0, maybe;
	long left;
	enum qe e;

	pthread_mutex_lock(&sp.mu);
	if (sp.nsegs == 0) {
		pthread_mutex_unlock(&sp.mu);
		return 0;
	}
	seq = sp.segs[0].seq;
	size = sp.segs[0].size;
	if (sp.rfd >= 0 && sp.rseq != seq) {
		close(sp.rfd);
		sp.rfd = -1;
	}
	if (sp.rfd < 0) {
		char name[SEG_NAME_LEN];

		seg_name(name, seq);
		sp.rfd = openat(sp.dirfd, name, O_RDONLY | O_CLOEXEC);
		sp.rseq = seq;
		sp.rpos = 0;
		sp.attempts = 0;
		sp.single_until = 0;
		sp.recheck_until = 0;
		if (sp.rfd < 0) {
			int gone = errno == ENOENT;

			log_error("spool: cannot open %s/%s: %s", sp.dir, name, strerror(errno));
			if (gone)
				drop_first();
			pthread_mutex_unlock(&sp.mu);
			return gone;
		}
	}
	if (sp.rpos >= size) {
		/* Everything up to the durable size is committed: the segment is done. */
		int gone = seg_done();

		pthread_mutex_unlock(&sp.mu);
		return gone;
	}
	pthread_mutex_unlock(&sp.mu);

	max = sp.rpos < sp.single_until ? 1 : DRAIN_BATCH_ITEMS;
	recs = calloc(max, sizeof(*recs));
	items = calloc(max, sizeof(*items));
	QASSERT(recs != NULL && items != NULL);
	rb->len = 0;
	pos = rb->at = sp.rpos;
	while (k < max && bytes < DRAIN_BATCH_BYTES) {
		struct rec *r = &recs[k];
		off_t at = pos;

		st = rec_read(rb, sp.rfd, pos, size, &r->boff, &r->len);
		if (st == SPOOL_REC_BAD) {
			/* Reported by the start-up scan (or damaged since): skip it. */
			log_debug("spool: skipping a record with a bad checksum");
			pos += REC_HDR + (off_t)r->len;
			continue;
		}
		if (st != SPOOL_REC_OK)
			break;
		r->body = rb->buf + r->boff;
		pos += REC_HDR + (off_t)r->len;
		if (rec_decode(r) < 0) {
			if (k > 0) {
				/* Store the batch before it; the next step sets it aside. */
				rec_clear(r);
				pos = at;
				break;
			}
			unreadable = 1;
			break;
		}
		bytes += r->len;
		items[k] = &r->it;
		k++;
	}
	for (size_t i = 0; i < k; i++)
		recs[i].body = rb->buf + recs[i].boff;	/* where the last read left the buffer */
	sp.read_hint = (size_t)(pos - sp.rpos) + DRAIN_READ_MIN;
	if (unreadable) {
		log_error("spool: a buffered push is not readable by this version: set aside in "
			  "%s/%s", sp.dir, FAILED_NAME);
		go_on = 0;
		if (set_aside(&recs[0]) == 0) {
			atomic_fetch_add(&sp_failed, 1);
			committed(seq, 1, pos);
			go_on = 1;
		}
		goto out;
	}
	if (k == 0) {
		if (st == SPOOL_REC_TORN || st == SPOOL_REC_GARBAGE) {
			/* Damaged since start-up checked it: go on at the next valid record. */
			off_t next = resync_at(sp.rfd, pos, size);

			log_error("spool: %s: segment %llu is damaged from byte %lld to %lld: "
				  "skipped, the records after it are kept", sp.dir,
				  (unsigned long long)seq, (long long)pos, (long long)next);
			committed(seq, 0, next);
		} else if (st == REC_IOERR) {
			log_error("spool: cannot read segment %llu: %s", (unsigned long long)seq,
				  strerror(errno));
			go_on = 0;
		} else {
			committed(seq, 0, pos);	/* only skipped records */
		}
		goto out;
	}

	/* A batch none of whose records can be stored already (none reached the database) is
	 * pushed as it is, without the probe of each dedup key. */
	left = leave_out_stored(db, recs, items, k,
				sp.rpos < sp.recheck_until || seq == sp.found_first, &maybe);
	e = left < 0 ? QE_DB : left == 0 ? QE_OK
	    : h_push_replay(db, items, (size_t)left, maybe, &refused);
	atomic_store(&sp_reached, e == QE_OK || refused);
	if (e == QE_OK) {
		size_t dup = 0;

		for (size_t i = 0; i < k; i++)
			dup += recs[i].it.status[0] == 'd';
		log_info("spool: stored %zu buffered pushes (%zu were duplicates)", k, dup);
		committed(seq, (long)k, pos);
		goto out;
	}
	go_on = 0;
	if (left > 0 && sp.recheck_until < pos)
		sp.recheck_until = pos;	/* a shard may have committed before the failure */
	if (!refused)
		goto out;	/* unreachable again: the next round retries */
	if (k > 1) {
		/* Refused: go through this batch one record at a time to find which. */
		sp.single_until = pos;
		go_on = 1;
		goto out;
	}
	sp.attempts++;
	log_warn("spool: the database refused buffered push %s of queue %.64s (%d of %d)",
		 recs[0].it.id, recs[0].it.queue, sp.attempts, REPLAY_ATTEMPTS);
	if (sp.attempts < REPLAY_ATTEMPTS) {
		sp.retry_at = now_ms() + 1000LL * sp.attempts;
		goto out;
	}
	if (set_aside(&recs[0]) == 0) {
		log_error("spool: buffered push %s of queue %.64s set aside in %s/%s",
			  recs[0].it.id, recs[0].it.queue, sp.dir, FAILED_NAME);
		atomic_fetch_add(&sp_failed, 1);
		committed(seq, 1, pos);
		go_on = 1;
	}
out:
	for (size_t i = 0; i < max; i++)
		rec_clear(&recs[i]);
	free(recs);
	free(items);
	/* Kept for the next batch while records wait, unless it grew past what a batch needs. */
	if (atomic_load(&sp_pending) == 0 || rb->cap > DRAIN_BUF_KEEP) {
		free(rb->buf);
		*rb = (struct rdbuf){ 0 };
	}
	return go_on;
}

void
spool_drain(struct dbconn *db)
{
	int64_t start = now_ms();
	int more = 0;

	if (sp.dirfd < 0 || now_ms() < sp.retry_at)
		return;
	while (!atomic_load(&sp_maint) && (more = drain_step(db)) != 0 &&
	       now_ms() - start < DRAIN_BUDGET_MS)
		;
	atomic_store(&sp_busy, more);
}

int64_t
spool_drain_interval_ms(void)
{
	/* Straight on while a round ran out of time with records left (pushes may be waiting
	 * for them, spool_wait_drained); soon again while records wait for the database. */
	if (atomic_load(&sp_pending) == 0)
		return DRAIN_INTERVAL_MS;
	return atomic_load(&sp_busy) ? 0 : DRAIN_RETRY_MS;
}

/* ---- state ---------------------------------------------------------------------------- */

int
spool_diverting(void)
{
	return atomic_load(&sp_maint) || atomic_load(&sp_pending) > 0;
}

int
spool_replaying(void)
{
	return !atomic_load(&sp_maint) && atomic_load(&sp_pending) > 0 &&
	       atomic_load(&sp_reached);
}

long
spool_pending(void)
{
	return atomic_load(&sp_pending);
}

long
spool_failed(void)
{
	return atomic_load(&sp_failed);
}

void
spool_set_maintenance(int on)
{
	if (atomic_exchange(&sp_maint, on ? 1 : 0) != (on ? 1 : 0))
		log_warn("maintenance mode %s: pushes %s", on ? "on" : "off",
			 on ? "go to the spool" : "are stored again once the spool is drained");
}

int
spool_maintenance(void)
{
	return atomic_load(&sp_maint);
}
