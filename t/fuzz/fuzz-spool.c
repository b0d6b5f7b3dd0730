/* fuzz-spool: libFuzzer target of the spool record decoder and of start-up recovery
 * (src/spool.c): what a crash, a full disk or a bad sector can leave in FILE_BUFFER_DIR.
 *
 * The first input byte chooses the form of the rest. Even: the rest is a segment file as it
 * is. Odd: the rest is a list of records, each [flags u8][length u16 LE][body], that the target
 * frames with a correct header and CRC (flags bit 0: a wrong CRC, bit 1: a wrong magic, bit 2:
 * the record is cut short, which only a crash mid-append leaves), so that the decoder sees
 * bodies that pass the checksum. Every body is also decoded directly.
 *
 * The oracle: a decoded record has a non-empty queue and partition and a valid id; recovery
 * never counts more records than the file can hold, and running it again over what it left
 * finds the same count (it converges: a second start-up drops nothing more). */
#include "h_push.h"
#include "log.h"
#include "qassert.h"
#include "spool.h"
#include "uuid.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], seg[128];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* tmpfs: the spool fsyncs every append and its start-up probe. */
	snprintf(dir, sizeof(dir), "%s/queen-fuzz-spool-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	QASSERT(mkdtemp(dir) != NULL);
	snprintf(seg, sizeof(seg), "%s/seg-00000000000000000001.spool", dir);
	/* Quiet: recovery reports every damaged record at level error. */
	log_set_level((enum log_level)(LOG_LV_ERROR - 1));
	return 0;
}

static void
put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void
check_decode(const unsigned char *body, uint32_t len)
{
	struct push_item it;
	unsigned flags;
	char *mem;

	if (spool_rec_decode(body, len, &it, &mem, &flags) == 0) {
		QASSERT(it.queue && it.queue[0] && it.partition && it.partition[0]);
		QASSERT(it.payload && uuid_valid(it.id));
		QASSERT(strlen(it.queue) + strlen(it.partition) + strlen(it.payload) < len);
	}
	free(mem);
}

/* Frames the record list of the odd form into a file image; *intact counts the records
 * written whole with a correct header. */
static unsigned char *
frame(const uint8_t *p, size_t n, size_t *outlen, long *intact)
{
	unsigned char *out = malloc(n * 6 + 16);
	size_t o = 0;

	QASSERT(out != NULL);
	*intact = 0;
	while (n >= 3) {
		uint8_t flags = p[0];
		uint32_t len = (uint32_t)p[1] | (uint32_t)p[2] << 8;
		unsigned char *h = out + o;

		p += 3;
		n -= 3;
		if (len > n)
			len = (uint32_t)n;
		check_decode(p, len);
		put32(h, (flags & 2) ? 0x32505351u : 0x31505351u);
		put32(h + 4, len);
		put32(h + 8, spool_crc32c(spool_crc32c(0, h + 4, 4), p, len) ^ (flags & 1));
		memcpy(h + 12, p, len);
		if ((flags & 4) && len > 0) {
			o += 12 + len / 2;	/* a torn append is always the last thing written */
			break;
		}
		o += 12 + len;
		*intact += !(flags & 3);
		p += len;
		n -= len;
	}
	*outlen = o;
	return out;
}

static void
write_file(const unsigned char *p, size_t n)
{
	int fd = open(seg, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	QASSERT(fd >= 0);
	QASSERT(write(fd, p, n) == (ssize_t)n);
	close(fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *image;
	size_t len;
	long intact, first;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		image = frame(data + 1, size - 1, &len, &intact);
	} else {
		len = size - 1;
		image = malloc(len + 1);
		QASSERT(image != NULL);
		memcpy(image, data + 1, len);
	}
	/* A damaged record's body may hold whole records that recovery finds again: the only
	 * bound is what fits in the file (a record takes at least its header). */
	intact = (long)len / 12 + 1;
	write_file(image, len);
	QASSERT(spool_open(dir) == 0);
	first = spool_pending();
	QASSERT(first >= 0 && first <= intact);
	spool_close();
	QASSERT(spool_open(dir) == 0);
	QASSERT(spool_pending() == first);
	spool_close();
	unlink(seg);
	free(image);
	return 0;
}
