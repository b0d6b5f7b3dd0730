/* h_queue: configure, queue detail, depth and delete (SPEC 9). */
#ifndef QUEEN_H_QUEUE_H
#define QUEEN_H_QUEUE_H

#include "errors.h"

struct req;
struct wk;

enum qe h_configure_prepare(struct req *r);
enum qe h_configure_run(struct req *r, struct wk *w);
enum qe h_queue_get(struct req *r, struct wk *w);
enum qe h_queue_depth(struct req *r, struct wk *w);
enum qe h_queue_delete(struct req *r, struct wk *w);

#endif
