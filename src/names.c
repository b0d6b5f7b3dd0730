/* names: validation of names and the labels of a queue name (see names.h). */
#include "names.h"
#include "conf.h"

#include <stdio.h>
#include <string.h>

/* Length of the UTF-8 sequence at s (at most n bytes) and its code point, or 0 when it is
 * not a valid, shortest-form sequence of a scalar value. */
static size_t
utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
	unsigned c = s[0], min;
	size_t len;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		c &= 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

int
names_utf8(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		unsigned cp;
		size_t n = utf8_seq(p + i, len - i, &cp);

		if (n == 0 || cp == 0)
			return 0;
		i += n;
	}
	return 1;
}

const char *
names_invalid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	if (len == 0)
		return "must not be empty";
	if (len > (size_t)qconf.max_name_bytes || len >= NAMES_BUF) {
		static __thread char why[48];

		snprintf(why, sizeof(why), "must be at most %lld bytes",
			 (long long)qconf.max_name_bytes);
		return why;
	}
	for (size_t i = 0; i < len;) {
		unsigned cp;
		size_t n = utf8_seq(p + i, len - i, &cp);

		if (n == 0)
			return "must be valid UTF-8";
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return "must not hold control characters";
		i += n;
	}
	return NULL;
}

int
names_is_name_field(const char *field)
{
	static const char *const fields[] = { "queue", "partition", "consumerGroup", "group",
					      "namespace", "task" };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strcmp(field, fields[i]) == 0)
			return 1;
	return 0;
}

void
names_labels(const char *queue, char *ns, size_t nslen, char *task, size_t tasklen)
{
	const char *dot = strchr(queue, '.');
	const char *dot2 = dot ? strchr(dot + 1, '.') : NULL;

	if (!dot) {
		snprintf(ns, nslen, "%s", queue);
		snprintf(task, tasklen, "%s", "");
		return;
	}
	snprintf(ns, nslen, "%.*s", (int)(dot - queue), queue);
	if (dot2)
		snprintf(task, tasklen, "%.*s", (int)(dot2 - dot - 1), dot + 1);
	else
		snprintf(task, tasklen, "%s", dot + 1);
}
