/* jsonio: parsing and formatting helpers shared by every handler. */
#include "jsonio.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int
jio_parse_bool(const char *s, int *out)
{
	if (!s)
		return -1;
	if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0) {
		*out = 1;
		return 0;
	}
	if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0) {
		*out = 0;
		return 0;
	}
	return -1;
}

int
jio_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int
digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)**p))
			return -1;
		v = v * 10 + (**p - '0');
		(*p)++;
	}
	*out = v;
	return 0;
}

/* Days from 1970-01-01 to a civil date (proleptic Gregorian). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int
jio_parse_iso(const char *s, int64_t *unix_ms)
{
	const char *p = s;
	int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0, off = 0;

	if (!s || digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d))
		return -1;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		p++;
		if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
			return -1;
		if (*p == ':') {
			p++;
			if (digits(&p, 2, &sec))
				return -1;
			if (*p == '.') {
				int scale = 100;

				p++;
				if (!isdigit((unsigned char)*p))
					return -1;
				while (isdigit((unsigned char)*p)) {
					ms += (*p - '0') * scale;
					scale /= 10;
					p++;
				}
			}
		}
		if (*p == 'Z' || *p == 'z') {
			p++;
		} else if (*p == '+' || *p == '-') {
			int sign = *p++ == '-' ? -1 : 1, oh, om = 0;

			if (digits(&p, 2, &oh))
				return -1;
			if (*p == ':')
				p++;
			if (*p && digits(&p, 2, &om))
				return -1;
			off = sign * (oh * 60 + om);
		}
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	*unix_ms = ((days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) -
		    (int64_t)off * 60) * 1000 + ms;
	return 0;
}

void
jio_format_iso(int64_t unix_ms, char *buf, size_t len)
{
	time_t t = (time_t)(unix_ms / 1000);
	int ms = (int)(unix_ms % 1000);
	struct tm tm;

	if (ms < 0) {
		ms += 1000;
		t--;
	}
	gmtime_r(&t, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

int
jio_has_ctl(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 1;
	return 0;
}

int
jio_field(json_t *o, const char *key, enum jio_kind k, json_t **out, char *err, size_t errlen)
{
	static const char *names[] = { "string", "integer", "boolean", "array", "object", "value" };
	json_t *v = json_object_get(o, key);
	int ok;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	switch (k) {
	case JIO_STRING: ok = json_is_string(v); break;
	case JIO_INT: ok = json_is_integer(v); break;
	case JIO_BOOL: ok = json_is_boolean(v); break;
	case JIO_ARRAY: ok = json_is_array(v); break;
	case JIO_OBJECT: ok = json_is_object(v); break;
	default: ok = 1; break;
	}
	if (!ok) {
		snprintf(err, errlen, "%s must be a%s %s", key, k == JIO_INT || k == JIO_ARRAY ||
			 k == JIO_OBJECT ? "n" : "", names[k]);
		return -1;
	}
	*out = v;
	return 0;
}

int
jio_whole(double d, int64_t min, int64_t max, int64_t *out)
{
	/* 2^53: past it a double no longer holds every whole number, and far below the
	 * limits of int64_t; NaN fails both comparisons. */
	if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0))
		return -1;
	if (d != (double)(int64_t)d || (int64_t)d < min || (int64_t)d > max)
		return -1;
	*out = (int64_t)d;
	return 0;
}

json_t *
jio_load(const char *buf, size_t len, json_error_t *err)
{
	const char *nul = memchr(buf, '\0', len);

	if (nul) {
		memset(err, 0, sizeof(*err));
		snprintf(err->text, sizeof(err->text), "a raw NUL byte at byte %zu",
			 (size_t)(nul - buf));
		err->position = (int)(nul - buf);
		err->line = -1;
		return NULL;
	}
	return json_loadb(buf, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, err);
}
