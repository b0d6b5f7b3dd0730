/* log: one line per event to stderr, with a journald priority prefix ("<3>") so systemd keeps
 * the level. Never log secrets, tokens or payloads: ids and sizes only. Thread-safe. */
#ifndef QUEEN_LOG_H
#define QUEEN_LOG_H

enum log_level { LOG_LV_ERROR = 3, LOG_LV_WARN = 4, LOG_LV_INFO = 6, LOG_LV_DEBUG = 7 };

/* Parses "error", "warn", "info", "debug"; returns -1 when unknown. */
int log_level_parse(const char *s);
void log_set_level(enum log_level lv);
int log_enabled(enum log_level lv);

/* The request this thread is serving (0 = none): every line logged meanwhile names it as
 * "req=N", so an error logged deep down (a statement PostgreSQL refused) is found from the
 * access line of its request. */
void log_request(unsigned long long id);

void log_msg(enum log_level lv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LV_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LV_WARN, __VA_ARGS__)
#define log_info(...) do { if (log_enabled(LOG_LV_INFO)) log_msg(LOG_LV_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_enabled(LOG_LV_DEBUG)) log_msg(LOG_LV_DEBUG, __VA_ARGS__); } while (0)

#endif
