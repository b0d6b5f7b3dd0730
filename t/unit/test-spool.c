/* Unit tests of spool: the CRC-32C check value, and the file life cycle without a database:
 * appended items survive a close and reopen, a torn tail record is dropped at open, and a
 * second opener of the directory is refused. */
#include "h_push.h"
#include "log.h"
#include "spool.h"
#include "tap.h"
#include "uuid.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void
item(struct push_item *it, const char *txn, char *payload)
{
	memset(it, 0, sizeof(*it));
	it->queue = "q";
	it->partition = "Default";
	it->txn = txn;
	it->payload = payload;
	uuid_v7(it->id);
}

/* The iSCSI vectors of RFC 3720 (B.4), and every start and length of a buffer against a
 * byte-at-a-time CRC, so that the eight-byte steps and the tail meet at any alignment: for
 * the CRC the spool uses (the CPU's instruction where it has one) and for the tables. */
static const char *
named(const char *what, const char *how)
{
	static char name[160];

	snprintf(name, sizeof(name), "%s (%s)", what, how);
	return name;
}

static void
crc_vectors(uint32_t (*crc)(uint32_t, const void *, size_t), const char *how)
{
	unsigned char v[32], buf[96];
	uint32_t x = 12345;
	int bad = 0;

	is_int(crc(0, "123456789", 9), 0xe3069283u, named("CRC-32C check value", how));
	is_int(crc(crc(0, "1234", 4), "56789", 5), 0xe3069283u,
	       named("CRC-32C continues over pieces", how));
	memset(v, 0, sizeof(v));
	is_int(crc(0, v, 32), 0x8a9136aau, named("CRC-32C of 32 zero bytes", how));
	memset(v, 0xff, sizeof(v));
	is_int(crc(0, v, 32), 0x62a8ab43u, named("CRC-32C of 32 bytes 0xff", how));
	for (int i = 0; i < 32; i++)
		v[i] = (unsigned char)i;
	is_int(crc(0, v, 32), 0x46dd794eu, named("CRC-32C of 32 ascending bytes", how));
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
	for (size_t from = 0; from < 16; from++)
		for (size_t n = 0; from + n <= sizeof(buf); n++) {
			uint32_t ref = ~0u;

			for (size_t i = from; i < from + n; i++) {
				ref ^= buf[i];
				for (int k = 0; k < 8; k++)
					ref = (ref & 1) ? (ref >> 1) ^ 0x82f63b78u : ref >> 1;
			}
			bad += crc(0, buf + from, n) != ~ref;
			bad += crc(crc(0, buf + from, n / 3), buf + from + n / 3, n - n / 3) != ~ref;
		}
	is_int(bad, 0, named("CRC-32C agrees with a bit-at-a-time one at every start and length",
			     how));
}

int
main(void)
{
	char dir[] = "/tmp/queen-spool-XXXXXX", path[512];
	char p0[] = "{\"i\":0}", p1[] = "[1,2]", p2[] = "\"two\"";
	struct push_item a, b, c, *items[3] = { &a, &b, &c };
	struct stat st;
	glob_t g;
	int fd;

	log_set_level(LOG_LV_ERROR);
	crc_vectors(spool_crc32c, "the spool's");
	crc_vectors(spool_crc32c_tables, "tables");

	if (!mkdtemp(dir))
		return 1;
	ok(spool_open(dir) == 0, "open a fresh directory");
	is_int(spool_pending(), 0, "nothing pending");
	ok(!spool_diverting(), "pushes are not diverted");
	item(&a, "t-0", p0);
	item(&b, NULL, p1);
	item(&c, "t-2", p2);
	ok(spool_append(items, 3, 0) == QE_OK, "append three items");
	is_str(a.status, "buffered", "status buffered");
	is_str(b.message_id, b.id, "message_id is the item's id");
	is_int(spool_pending(), 3, "three pending");
	ok(spool_diverting(), "pushes are diverted while something is pending");

	snprintf(path, sizeof(path), "%s/queend.lock", dir);
	fd = open(path, O_RDWR);
	ok(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0, "the directory is locked while open");
	if (fd >= 0)
		close(fd);
	spool_close();

	ok(spool_open(dir) == 0, "reopen");
	is_int(spool_pending(), 3, "the three items are found again");
	spool_close();

	snprintf(path, sizeof(path), "%s/seg-*.spool", dir);
	ok(glob(path, 0, NULL, &g) == 0 && g.gl_pathc == 1, "one segment file");
	if (g.gl_pathc == 1 && stat(g.gl_pathv[0], &st) == 0)
		ok(truncate(g.gl_pathv[0], st.st_size - 3) == 0, "cut 3 bytes off its tail");
	ok(spool_open(dir) == 0, "reopen after a torn write");
	is_int(spool_pending(), 2, "the torn record is dropped, the others kept");
	spool_close();
	if (g.gl_pathc == 1 && stat(g.gl_pathv[0], &st) == 0)
		ok(st.st_size > 0, "the file keeps its intact records");

	/* Damage in the middle: the second of the two records left loses its marker. The
	 * pure functions skip to the next valid record, and a reopen keeps it. */
	if (g.gl_pathc == 1) {
		unsigned char buf[4096];
		size_t len = 0, reclen = 0, next;
		FILE *f = fopen(g.gl_pathv[0], "rb");

		if (f) {
			len = fread(buf, 1, sizeof(buf), f);
			fclose(f);
		}
		ok(spool_rec_check(buf, len, &reclen) == SPOOL_REC_OK && reclen < len,
		   "the first record checks");
		ok(spool_rec_resync(buf, len, 1) == reclen, "resync from inside it finds the second");
		buf[reclen + 13]++;
		ok(spool_rec_check(buf + reclen, len - reclen, &next) == SPOOL_REC_BAD,
		   "a changed byte fails the checksum");
		buf[reclen + 13]--;
		{
			struct push_item it;
			char *mem;
			unsigned flags;

			ok(spool_rec_decode(buf + 12, reclen - 12, &it, &mem, &flags) == 0 &&
			   strcmp(it.queue, "q") == 0 && strcmp(it.payload, p0) == 0 && it.txn &&
			   strcmp(it.txn, "t-0") == 0 && flags == 1, "the first record decodes");
			free(mem);
			ok(spool_rec_decode(buf + 12, reclen - 13, &it, &mem, &flags) < 0 && !mem,
			   "a body one byte short does not");
		}
		ok(spool_rec_check(buf, 5, &next) == SPOOL_REC_TORN, "five bytes are a torn record");
		ok(spool_rec_resync(buf, len, reclen + 1) == len, "no record after the last");
		/* A third record, then the second's marker damaged: the third must survive. */
		ok(spool_open(dir) == 0, "reopen to append");
		ok(spool_append(items + 2, 1, 1) == QE_OK, "append a record flagged sent");
		spool_close();
		f = fopen(g.gl_pathv[0], "r+b");
		ok(f && fseek(f, (long)reclen, SEEK_SET) == 0 && fputc('X', f) != EOF,
		   "damage the marker of the second record");
		if (f)
			fclose(f);
		ok(spool_open(dir) == 0, "reopen after damage in the middle");
		is_int(spool_pending(), 2, "the damaged record is lost, the ones around it kept");
		spool_close();
		ok(spool_open(dir) == 0, "reopen once more");
		is_int(spool_pending(), 2, "the file was rewritten without the damage");
		spool_close();
	}
	if (g.gl_pathc == 1)
		unlink(g.gl_pathv[0]);
	globfree(&g);

	snprintf(path, sizeof(path), "%s/queend.lock", dir);
	unlink(path);
	rmdir(dir);
	return tap_done();
}
