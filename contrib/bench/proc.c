/*
 * queen-bench: what /proc says about the broker (CPU time, resident memory), and the phase
 * "rss" that prints its peak RSS at the end of the run.
 */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* utime, stime, cutime, cstime and the parent of /proc/<pid>/stat; 0, or -1 when unreadable. */
static int proc_stat(long pid, long *ppid, unsigned long long t[4])
{
	char path[64], line[1024], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	/* The command name (field 2) may hold spaces and parentheses: count from its end. */
	if (!p || !(p = strrchr(line, ')')))
		return -1;
	return sscanf(p + 1, " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
		      ppid, &t[0], &t[1], &t[2], &t[3]) == 5 ? 0 : -1;
}

double proc_cpu_seconds(long pid)
{
	unsigned long long t[4];
	long ppid;

	if (proc_stat(pid, &ppid, t) < 0)
		return -1;
	return (double)(t[0] + t[1]) / (double)sysconf(_SC_CLK_TCK);
}

double pg_cpu_seconds(void)
{
	char path[PATH_MAX];
	unsigned long long t[4], sum;
	long pm = 0, pid, ppid;
	struct dirent *de;
	FILE *f;
	DIR *d;

	if (!opt.pg_data)
		return -1;
	/* Read at every mark: an outage phase starts another postmaster. */
	snprintf(path, sizeof(path), "%s/postmaster.pid", opt.pg_data);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%ld", &pm) != 1)
			pm = 0;
		fclose(f);
	}
	if (pm <= 0 || proc_stat(pm, &ppid, t) < 0 || !(d = opendir("/proc")))
		return -1;
	sum = t[0] + t[1] + t[2] + t[3];
	while ((de = readdir(d)))
		if ((pid = strtol(de->d_name, NULL, 10)) > 0 && pid != pm &&
		    proc_stat(pid, &ppid, t) == 0 && ppid == pm)
			sum += t[0] + t[1];
	closedir(d);
	return (double)sum / (double)sysconf(_SC_CLK_TCK);
}

long proc_status_kib(long pid, const char *field)
{
	char path[64], line[256];
	size_t k = strlen(field);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, k) == 0 && line[k] == ':') {
			v = strtol(line + k + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

void cpu_mark(struct cpu_mark *m)
{
	m->broker = opt.queend_pid > 0 ? proc_cpu_seconds(opt.queend_pid) : -1;
	m->db = pg_cpu_seconds();
	m->t = now();
}

double cpu_us_per_msg(const struct cpu_mark *m, long messages)
{
	double c;

	if (m->broker < 0 || messages <= 0)
		return -1;
	c = proc_cpu_seconds(opt.queend_pid);
	return c < 0 ? -1 : (c - m->broker) * 1e6 / (double)messages;
}

void figure_cpu(const char *label, const struct cpu_mark *m, long messages, const char *target)
{
	char note[96], dblabel[128];
	double us = cpu_us_per_msg(m, messages), db;

	if (us < 0) {
		printf("%s: not measured (%s)\n", label,
		       opt.queend_pid > 0 ? "no messages or /proc unreadable" : "no --queend-pid");
		return;
	}
	snprintf(note, sizeof(note), "[%ld msgs, broker %.0f%% of a core] %s", messages,
		 100 * us * (double)messages / 1e6 / (now() - m->t), target ? target : "");
	figure(label, us, "us/msg", -1, note);
	if (m->db >= 0 && (db = pg_cpu_seconds()) >= 0 && strncmp(label, "broker ", 7) == 0) {
		snprintf(dblabel, sizeof(dblabel), "database %s", label + 7);
		snprintf(note, sizeof(note), "[database %.0f%% of a core]",
			 100 * (db - m->db) / (now() - m->t));
		figure(dblabel, (db - m->db) * 1e6 / (double)messages, "us/msg", -1, note);
	}
}

/* ---------------------------------------------------------------- phase: peak RSS */

void phase_rss(void)
{
	char note[96] = "";
	long hwm, rss;

	if (opt.queend_pid <= 0) {
		printf("queend peak RSS: skipped (no --queend-pid)\n");
		return;
	}
	hwm = proc_status_kib(opt.queend_pid, "VmHWM");
	rss = proc_status_kib(opt.queend_pid, "VmRSS");
	if (hwm < 0) {
		printf("queend peak RSS: cannot read VmHWM of pid %ld\n", opt.queend_pid);
		grand_failures++;
		return;
	}
	if (rss >= 0)
		snprintf(note, sizeof(note), "[now %.1f MiB]", (double)rss / 1024);
	figure("queend peak RSS", (double)hwm / 1024, "MiB", -1, note);
}
