/* httpconn: what the broker knows of each HTTP connection's bytes, by fd: whether what it has
 * read was answered or formed a request line. libmicrohttpd 0.9.75 shuts a connection down
 * without an answer when it cannot parse its request line at all; mhderr.c (the executable's
 * recv, send and shutdown) asks here whether that is what a shutdown means, and answers 400
 * first. http.c says which fds are HTTP connections and when a request line was parsed. */
#ifndef QUEEN_HTTPCONN_H
#define QUEEN_HTTPCONN_H

/* fd was accepted; fd is about to be closed. Other fds (PostgreSQL's) are never tracked. */
void httpconn_open(int fd);
void httpconn_closed(int fd);
/* A request line was parsed on fd: the library answers what it read. */
void httpconn_request_line(int fd);
/* Bytes were read from fd; an answer (some of it) was sent on fd. */
void httpconn_received(int fd);
void httpconn_sent(int fd);
/* 1 when fd is an HTTP connection holding bytes neither answered nor parsed as a request
 * line; they count as answered from then on. */
int httpconn_take_unanswered(int fd);

#endif
