/* h_pop: the three pop routes (SPEC 5): claiming, long-poll, autopilot. */
#ifndef QUEEN_H_POP_H
#define QUEEN_H_POP_H

#include "errors.h"

struct req;
struct wk;

enum qe h_pop_prepare(struct req *r);
enum qe h_pop_run(struct req *r, struct wk *w);

#endif
