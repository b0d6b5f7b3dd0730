/*
 * queen-bench: failures and figures.  Each phase counts what went wrong by kind and prints one
 * line of it; every figure is printed as it is measured, with its ratio to the run's raw
 * INSERT baseline when it is a rate, and again in the summary at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* ---------------------------------------------------------------- failures */

void tally_add(struct tally *t, const char *name, size_t nlen, long k)
{
	int i;

	if (nlen >= sizeof(t[0].name))
		nlen = sizeof(t[0].name) - 1;
	for (i = 0; i < NTALLY && t[i].count; i++)
		if (strlen(t[i].name) == nlen && memcmp(t[i].name, name, nlen) == 0)
			break;
	if (i == NTALLY)
		i = NTALLY - 1;		/* overflow lumps into the last slot */
	if (!t[i].count) {
		memcpy(t[i].name, name, nlen);
		t[i].name[nlen] = '\0';
	}
	t[i].count += k;
}

static long failures_total(const struct failures *f)
{
	long n = f->transport + f->timeouts;

	for (int i = 0; i < NTALLY; i++)
		n += f->http[i].count + f->items[i].count;
	return n;
}

void failures_note(struct failures *f, const char *what, const char *text, size_t n)
{
	if (n > 160)
		n = 160;
	if (opt.verbose)
		fprintf(stderr, "queen-bench: %s: %.*s\n", what, (int)n, text);
	if (f->first[0])
		return;
	snprintf(f->first, sizeof(f->first), "%s: %.*s", what, (int)n, text);
	for (char *p = f->first; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

long grand_failures;

void failures_print(const char *label, const struct failures *f)
{
	long total = failures_total(f);

	grand_failures += total;
	if (!total)
		return;
	printf("  FAILURES in %s: %ld", label, total);
	for (int i = 0; i < NTALLY && f->http[i].count; i++)
		printf(" | HTTP %s x%ld", f->http[i].name, f->http[i].count);
	for (int i = 0; i < NTALLY && f->items[i].count; i++)
		printf(" | item %s x%ld", f->items[i].name, f->items[i].count);
	if (f->transport)
		printf(" | transport errors x%ld", f->transport);
	if (f->timeouts)
		printf(" | timeouts x%ld", f->timeouts);
	printf("\n");
	if (f->first[0])
		printf("  first error: %s\n", f->first);
}

/* ---------------------------------------------------------------- figures */

struct figure {
	char label[64];
	double value;
	const char *unit;
	int base;		/* index into base_rate, or -1 */
	char note[128];
};

static struct figure figures[128];
static int nfigures;
double base_rate[2];
const char *base_name[2] = { "100B", "1KiB" };

static void figure_line(const struct figure *f, char *out, size_t n)
{
	/* A label that has its own colon ("...: fired in") reads on without a second one. */
	const char *sep = strchr(f->label, ':') ? " " : ": ";
	int k;

	if (strcmp(f->unit, "x") == 0)		/* a ratio: 0.45x */
		k = snprintf(out, n, "%s%s%.2fx", f->label, sep, f->value);
	else if (strcmp(f->unit, "s") == 0)
		k = snprintf(out, n, "%s%s%.2f %s", f->label, sep, f->value, f->unit);
	else if (strcmp(f->unit, "ms") == 0 || strcmp(f->unit, "MiB") == 0 ||
		 strcmp(f->unit, "us/msg") == 0)
		k = snprintf(out, n, "%s%s%.1f %s", f->label, sep, f->value, f->unit);
	else
		k = snprintf(out, n, "%s%s%.0f %s", f->label, sep, f->value, f->unit);
	if (k < 0 || (size_t)k >= n)
		return;
	if (f->base >= 0 && base_rate[f->base] > 0)
		snprintf(out + k, n - (size_t)k, " (%.2fx baseline %s)",
			 f->value / base_rate[f->base], base_name[f->base]);
	else if (f->base >= 0)
		snprintf(out + k, n - (size_t)k, " (no baseline)");
}

void figure(const char *label, double value, const char *unit, int base, const char *note)
{
	struct figure *f;
	char line[256];

	if (nfigures == (int)(sizeof(figures) / sizeof(figures[0])))
		die("too many figures");
	f = &figures[nfigures++];
	snprintf(f->label, sizeof(f->label), "%s", label);
	f->value = value;
	f->unit = unit;
	f->base = base;
	snprintf(f->note, sizeof(f->note), "%s", note ? note : "");
	figure_line(f, line, sizeof(line));
	printf("%s%s%s\n", line, f->note[0] ? "  " : "", f->note);
}

void figure_ratio(const char *label, double num, double den, const char *note)
{
	figure(label, den > 0 ? num / den : 0, "x", -1, note);
}

void print_summary(void)
{
	char line[256];

	printf("\n== queen-bench summary (run %s) ==\n", run_id);
	for (int i = 0; i < nfigures; i++) {
		figure_line(&figures[i], line, sizeof(line));
		printf("  %s\n", line);
	}
	printf("  failures: %ld\n", grand_failures);
}
