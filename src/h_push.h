/* h_push: POST /api/v1/push (SPEC 4), with group commit of concurrent requests. */
#ifndef QUEEN_H_PUSH_H
#define QUEEN_H_PUSH_H

#include "errors.h"
#include "router.h"

struct req;
struct wk;

enum qe h_push_prepare(struct req *r);
enum qe h_push_run(struct req *r, struct wk *w);
void h_push_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs);

#endif
