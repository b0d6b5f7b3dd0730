/* h_ack: POST /api/v1/ack, /api/v1/ack/batch (SPEC 6) and lease extend (SPEC 7). */
#ifndef QUEEN_H_ACK_H
#define QUEEN_H_ACK_H

#include "errors.h"

struct req;
struct wk;

enum qe h_ack_prepare(struct req *r);
enum qe h_ack_run(struct req *r, struct wk *w);
enum qe h_extend_prepare(struct req *r);
enum qe h_extend_run(struct req *r, struct wk *w);

#endif
