/* h_dlq: dead letters (SPEC 11): listing. */
#ifndef QUEEN_H_DLQ_H
#define QUEEN_H_DLQ_H

#include "errors.h"

struct req;
struct wk;

enum qe h_dlq_list(struct req *r, struct wk *w);

#endif
