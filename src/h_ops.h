/* h_ops: /health, /metrics and /metrics/prometheus (SPEC 16). */
#ifndef QUEEN_H_OPS_H
#define QUEEN_H_OPS_H

#include "errors.h"

struct req;
struct wk;

enum qe h_health(struct req *r, struct wk *w);
enum qe h_metrics(struct req *r, struct wk *w);
enum qe h_prometheus(struct req *r, struct wk *w);

#endif
