/*
 * queen-bench: a one-run benchmark of queend against the PostgreSQL it stores into.
 *
 * Every throughput figure is printed with its ratio to a baseline measured in the same run on
 * the same server: the same payloads inserted straight over libpq, 100 rows per INSERT, from
 * 16 connections (baseline.c).  Each phase is a file of its own; this file holds the options,
 * the order the phases run in, and the summary.  `--help` lists the phases.
 */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

struct bench_opt opt = {
	.host = "127.0.0.1",
	.port = "6632",
	.duration = 10,
	.steady_seconds = 60,
	.outage_seconds = 10,
	.pop_messages = 200000,
	.drain_messages = 100000,
	.scale_partitions = 1000000,
	.many_partitions = 10000,
	.pop_autopilot = 1,
	.lat_samples = 200,
};

char run_id[32];

static void phase_baseline_both(void)
{
	if (!opt.pg) {
		printf("baseline: skipped (no --pg)\n");
		return;
	}
	phase_baseline(&payloads[0]);
	phase_baseline(&payloads[1]);
}

static void phase_push_all(void)
{
	int parts[2] = { 10, opt.many_partitions };

	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 2; i++) {
			phase_push(PUSH_BIG_BATCH, PUSH_BIG_CONNS, &payloads[i], parts[k]);
			phase_push(1, PUSH_SMALL_CONNS, &payloads[i], parts[k]);
		}
}

static void phase_pop_both(void)
{
	phase_pop(10);
	phase_pop(opt.many_partitions);
}

/* The phases in the order they run.  Retention comes last but the RSS reading: its queue
 * keeps the broker's rounds busy deleting for a while after the phase, which would disturb
 * any phase after it.  Scale runs only when asked (--scale, or named in --only) and after
 * everything, since it restarts the broker. */
static const struct phase {
	const char *name;
	void (*run)(void);
	bool needs_broker;
	const char *what;
} phases[] = {
	{ "baseline", phase_baseline_both, false,
	  "raw 100-row INSERTs, 16 connections" },
	{ "push", phase_push_all, true,
	  "b100 x 8c, b1 x 64c; 100 B, 1 KiB; 10 and N partitions" },
	{ "push-load", phase_push_load, true,
	  "1 KiB: b100 16c 10p and Np, b1 16c and 64c, N new partitions" },
	{ "pop", phase_pop_both, true,
	  "pop+ack of --pop-messages, 10 and N partitions" },
	{ "drain", phase_drain, true,
	  "1 KiB drains: 10p, Np, --drain-messages partitions x 1" },
	{ "groups", phase_groups, true,
	  "4 and 16 groups on the same messages vs a lone one" },
	{ "steady", phase_steady, true,
	  "push at half capacity with consumers: backlog, latency" },
	{ "encrypt", phase_encrypt, true,
	  "b100 1 KiB, encrypted vs plain queue; repeated, unique payloads" },
	{ "outage", phase_outage, true,
	  "--pg-cmd: PostgreSQL stops --outage s under half and full load" },
	{ "txn", phase_txn, true,
	  "pop, then ack+push transactions, vs b1 pushes" },
	{ "timers", phase_timers, true,
	  "10,000 timers due in the same second" },
	{ "latency", phase_latency, true,
	  "long-poll wake latency" },
	{ "retention", phase_retention, true,
	  "pushes while retention rounds delete" },
	{ "rss", phase_rss, false,
	  "the broker's peak RSS" },
	{ "scale", phase_scale, true,
	  "--scale: 1,000,000 partitions x 1, restart" },
};
#define NPHASES (sizeof(phases) / sizeof(phases[0]))

static void usage(FILE *out)
{
	fprintf(out,
		"usage: queen-bench [options]\n"
		"  --url URL            queend base URL (default http://127.0.0.1:6632)\n"
		"  --pg CONNINFO        libpq conninfo of the same PostgreSQL, for the baseline\n"
		"  --queend-pid N       read the broker's CPU time and RSS from /proc\n"
		"  --pg-data DIR        the data directory of the same PostgreSQL: its CPU time\n"
		"                       from /proc, printed beside the broker's\n"
		"  --restart-cmd CMD    shell command that restarts the broker and prints its new pid\n"
		"                       (the scale phase; bench.sh passes one)\n"
		"  --duration SECONDS   length of each baseline and push phase and of the retention\n"
		"                       push window (default 10)\n"
		"  --steady SECONDS     length of the steady phase (default 60)\n"
		"  --pg-cmd CMD         `CMD stop` stops PostgreSQL, `CMD start` starts it\n"
		"                       and waits (the outage phase; bench.sh passes one)\n"
		"  --outage SECONDS     how long PostgreSQL stays stopped (default 10)\n"
		"  --quick              small sizes for a smoke run (2 s phases, 10k pop and drain\n"
		"                       backlogs, 1000 partitions, 20 latency samples, 5 s steady,\n"
		"                       2 s outage, 20,000 scale partitions)\n"
		"  --scale              also run the scale phase (long: a million partitions)\n"
		"  --only LIST          phases to run, comma-separated, from:\n");
	for (size_t i = 0; i < NPHASES; i++)
		fprintf(out, "                         %-10s %s\n", phases[i].name, phases[i].what);
	fprintf(out,
		"  --pop-messages N     pop backlog size (default 200000)\n"
		"  --drain-messages N   drain and groups backlog size (default 100000)\n"
		"  --many-partitions N  the \"many partitions\" count N (default 10000)\n"
		"  --scale-partitions N partitions of the scale phase (default 1000000)\n"
		"  --samples N          long-poll latency samples (default 200)\n"
		"  --pop-partitions N   send partitions=N with each pop (default: not sent, i.e. 1)\n"
		"  --no-autopilot       pops do not send autopilot=true (default: they do)\n"
		"  --verbose            print every failure to stderr, not only the first of a phase\n"
		"Exit status: 0 clean run, 1 when any failure was counted, 2 on usage/setup error.\n");
}

static void parse_url(const char *url)
{
	const char *p = url, *colon, *end;

	if (strncmp(p, "http://", 7) == 0)
		p += 7;
	else if (strstr(p, "://"))
		die("only http:// URLs are supported: %s", url);
	end = p + strcspn(p, "/");
	colon = memchr(p, ':', (size_t)(end - p));
	if (!colon)
		colon = end;
	if (colon == p || (size_t)(colon - p) >= sizeof(opt.host))
		die("bad --url %s", url);
	memcpy(opt.host, p, (size_t)(colon - p));
	opt.host[colon - p] = '\0';
	if (colon < end) {
		if ((size_t)(end - colon - 1) >= sizeof(opt.port) || end - colon < 2)
			die("bad --url %s", url);
		memcpy(opt.port, colon + 1, (size_t)(end - colon - 1));
		opt.port[end - colon - 1] = '\0';
	} else {
		strcpy(opt.port, "80");
	}
}

static bool want(const char *phase)
{
	const char *p = opt.only;
	size_t n = strlen(phase);

	if (!p)
		return true;
	while (*p) {
		size_t k = strcspn(p, ",");

		if (k == n && strncmp(p, phase, n) == 0)
			return true;
		p += k;
		if (*p == ',')
			p++;
	}
	return false;
}

static long parse_long(const char *s, const char *flag, long min)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < min)
		die("%s wants an integer >= %ld, not \"%s\"", flag, min, s);
	return v;
}

static bool runs(const struct phase *ph)
{
	if (strcmp(ph->name, "scale") == 0 && !opt.scale && !opt.only)
		return false;
	return want(ph->name);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "pg", required_argument, NULL, 'p' },
		{ "queend-pid", required_argument, NULL, 'P' },
		{ "pg-data", required_argument, NULL, 'B' },
		{ "restart-cmd", required_argument, NULL, 'R' },
		{ "duration", required_argument, NULL, 'd' },
		{ "steady", required_argument, NULL, 'S' },
		{ "pg-cmd", required_argument, NULL, 'G' },
		{ "outage", required_argument, NULL, 'O' },
		{ "quick", no_argument, NULL, 'q' },
		{ "scale", no_argument, NULL, 'L' },
		{ "only", required_argument, NULL, 'o' },
		{ "pop-messages", required_argument, NULL, 'm' },
		{ "drain-messages", required_argument, NULL, 'D' },
		{ "many-partitions", required_argument, NULL, 'n' },
		{ "scale-partitions", required_argument, NULL, 'N' },
		{ "samples", required_argument, NULL, 's' },
		{ "pop-partitions", required_argument, NULL, 'w' },
		{ "no-autopilot", no_argument, NULL, 'A' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool duration_set = false, pop_set = false, many_set = false, samples_set = false;
	bool drain_set = false, steady_set = false, scale_set = false, broker = false;
	bool outage_set = false;
	int ch;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			parse_url(optarg);
			break;
		case 'p':
			opt.pg = optarg;
			break;
		case 'P':
			opt.queend_pid = parse_long(optarg, "--queend-pid", 1);
			break;
		case 'B':
			opt.pg_data = optarg;
			break;
		case 'R':
			opt.restart_cmd = optarg;
			break;
		case 'd':
			opt.duration = strtod(optarg, NULL);
			if (opt.duration <= 0)
				die("--duration wants a positive number of seconds");
			duration_set = true;
			break;
		case 'S':
			opt.steady_seconds = strtod(optarg, NULL);
			if (opt.steady_seconds <= 0)
				die("--steady wants a positive number of seconds");
			steady_set = true;
			break;
		case 'G':
			opt.pg_cmd = optarg;
			break;
		case 'O':
			opt.outage_seconds = strtod(optarg, NULL);
			if (opt.outage_seconds <= 0)
				die("--outage wants a positive number of seconds");
			outage_set = true;
			break;
		case 'q':
			opt.quick = true;
			break;
		case 'L':
			opt.scale = true;
			break;
		case 'o':
			opt.only = optarg;
			break;
		case 'm':
			opt.pop_messages = parse_long(optarg, "--pop-messages", 1);
			pop_set = true;
			break;
		case 'D':
			opt.drain_messages = parse_long(optarg, "--drain-messages", 1);
			drain_set = true;
			break;
		case 'n':
			opt.many_partitions = (int)parse_long(optarg, "--many-partitions", 1);
			many_set = true;
			break;
		case 'N':
			opt.scale_partitions = parse_long(optarg, "--scale-partitions", 1);
			scale_set = true;
			break;
		case 's':
			opt.lat_samples = (int)parse_long(optarg, "--samples", 1);
			samples_set = true;
			break;
		case 'w':
			opt.pop_partitions = (int)parse_long(optarg, "--pop-partitions", 1);
			break;
		case 'A':
			opt.pop_autopilot = 0;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (opt.only) {
		const char *p = opt.only;

		while (*p) {
			size_t k = strcspn(p, ","), i;

			for (i = 0; i < NPHASES; i++)
				if (strlen(phases[i].name) == k && strncmp(p, phases[i].name, k) == 0)
					break;
			if (i == NPHASES)
				die("--only: unknown phase \"%.*s\" (--help lists them)", (int)k, p);
			p += k;
			if (*p == ',')
				p++;
		}
	}
	if (opt.quick) {
		if (!duration_set)
			opt.duration = 2;
		if (!pop_set)
			opt.pop_messages = 10000;
		if (!drain_set)
			opt.drain_messages = 10000;
		if (!many_set)
			opt.many_partitions = 1000;
		if (!samples_set)
			opt.lat_samples = 20;
		if (!steady_set)
			opt.steady_seconds = 5;
		if (!scale_set)
			opt.scale_partitions = 20000;
		if (!outage_set)
			opt.outage_seconds = 2;
	}
	snprintf(run_id, sizeof(run_id), "%lx%04x", (unsigned long)time(NULL),
		 (unsigned)getpid() & 0xffff);
	payload_init(&payloads[0], 100, "100b", 0);
	payload_init(&payloads[1], 1024, "1k", 1);
	resolve_target();

	printf("queen-bench run %s: queend %s:%s, %.0f s per phase, partitions 10 and %d%s\n",
	       run_id, opt.host, opt.port, opt.duration, opt.many_partitions,
	       opt.quick ? " (quick)" : "");
	for (size_t i = 0; i < NPHASES; i++) {
		if (!runs(&phases[i]))
			continue;
		if (phases[i].needs_broker && !broker) {
			check_health();
			broker = true;
		}
		phases[i].run();
	}
	print_summary();
	return grand_failures ? 1 : 0;
}
