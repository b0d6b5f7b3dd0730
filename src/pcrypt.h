/* pcrypt: payload encryption at rest (SPEC 17): AES-256-GCM envelopes, the set of encrypted
 * queues, and the one reveal step every read path uses.
 *
 * A payload pushed to a queue with encryptionEnabled is sealed in the broker, before any SQL
 * or spool write sees it, into {"encrypted":"<b64>","iv":"<b64>","authTag":"<b64>"} (random
 * 12-byte IV, 16-byte tag, standard base64). Reads reveal: an envelope that the current key or
 * one of QUEEN_ENCRYPTION_KEY_PREVIOUS opens becomes its plaintext again; one that none opens
 * is returned as is with "isEncrypted":true.
 *
 * Which queues are encrypted is a cache of queen_queues.encryption_enabled: filled at start,
 * updated by configure on this broker and by every index resync (configures on other brokers).
 * Thread context: pcrypt_start in main; everything else from any thread. */
#ifndef QUEEN_PCRYPT_H
#define QUEEN_PCRYPT_H

#include "errors.h"
#include "strbuf.h"

#include <stddef.h>

struct dbconn;

/* Parses QUEEN_ENCRYPTION_KEY and QUEEN_ENCRYPTION_KEY_PREVIOUS (already validated by conf). */
void pcrypt_start(void);
void pcrypt_stop(void);
/* 1 when QUEEN_ENCRYPTION_KEY is set: payloads can be sealed. */
int pcrypt_has_key(void);

/* The encrypted-queue cache. pcrypt_refresh re-reads it from the database (maintenance thread;
 * a failure keeps the old set). pcrypt_note sets one queue's flag (after a configure). */
void pcrypt_refresh(struct dbconn *db);
void pcrypt_note(const char *queue, int encrypted);

/* For a push item to queue with the JSON text payload[0..len): *sealed = NULL when the queue
 * is not encrypted, else the envelope text (malloc'd, the caller frees). QE_NO_KEY when the
 * queue is encrypted and this broker has no key (nothing may be stored). */
enum qe pcrypt_seal_for(const char *queue, const char *payload, size_t len, char **sealed);

/* Appends the revealed form of one stored payload text of len bytes to sb (pop answers). */
void pcrypt_reveal_sb(struct strbuf *sb, const char *text, size_t len);
/* Reveals every envelope inside a JSON document (message list and detail, dead letters): *json
 * (malloc'd) is replaced by a new text when it held one, and *len updated. */
void pcrypt_reveal_doc(char **json, size_t *len);

#endif
