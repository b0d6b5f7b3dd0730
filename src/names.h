/* names: the one place that holds the rules of names (SPEC 22): queue, partition, consumer
 * group, namespace and task names are 1 to QUEEN_MAX_NAME_BYTES (at most 255) bytes of
 * valid UTF-8 without control characters; and how a queue name gives its labels (SPEC 4, 21).
 * Every route that takes a name (push, pop, configure, groups, seek, timers, dlq, messages,
 * the transaction) checks it here, so PostgreSQL never sees a name it would refuse and the
 * fixed buffers that hold names (NAMES_BUF) never cut one. Pure functions, no state. */
#ifndef QUEEN_NAMES_H
#define QUEEN_NAMES_H

#include <stddef.h>

/* Holds any valid name and its NUL. */
#define NAMES_BUF 256

/* The consumer group of pops without one (queue mode). It has no stored start. */
#define QUEUE_MODE "__QUEUE_MODE__"

/* NULL when the len bytes at s are a valid name, else why not ("must not be empty", ...),
 * to follow the field's name in a 400. */
const char *names_invalid(const char *s, size_t len);
/* 1 when a path parameter or query parameter of that name holds a name (queue, partition,
 * consumerGroup, group, namespace, task): http.c applies names_invalid to each. */
int names_is_name_field(const char *field);
/* 1 when the len bytes at s are valid UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF) without a NUL. */
int names_utf8(const char *s, size_t len);
/* Labels of a queue name: namespace = the part before the first '.', or the whole name
 * without a dot; task = the part between the first and second '.', '' without one. Cut to
 * the buffers. */
void names_labels(const char *queue, char *ns, size_t nslen, char *task, size_t tasklen);

#endif
