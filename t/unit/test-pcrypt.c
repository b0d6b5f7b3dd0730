/* Unit tests of pcrypt's sealing and revealing on the text: a payload comes back byte for
 * byte, in a pop answer and inside a read view's document; what is not exactly an envelope
 * is left alone; an envelope no key opens is marked isEncrypted. */
#include "conf.h"
#include "pcrypt.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static const char key1[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
static const char key2[] = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100";

static char *
seal(const char *payload)
{
	char *env = NULL;

	if (pcrypt_seal_for("enc", payload, strlen(payload), &env) != QE_OK)
		return NULL;
	return env;
}

/* The pop answer's form of a stored text (malloc'd). */
static char *
reveal(const char *text)
{
	struct strbuf sb;

	sb_init(&sb);
	pcrypt_reveal_sb(&sb, text, strlen(text));
	return sb_steal(&sb, NULL);
}

/* A read view's document with the text in two places, revealed (malloc'd). */
static char *
reveal_in_doc(const char *text)
{
	struct strbuf sb;
	size_t len;
	char *doc;

	sb_init(&sb);
	sb_adds(&sb, "{\"messages\": [{\"id\": 1, \"data\": ");
	sb_adds(&sb, text);
	sb_adds(&sb, "}, {\"id\": 2, \"data\": ");
	sb_adds(&sb, text);
	sb_adds(&sb, "}], \"encrypted\": \"a key of the view\"}");
	doc = sb_steal(&sb, &len);
	pcrypt_reveal_doc(&doc, &len);
	return doc;
}

static void
start(const char *key, const char *previous)
{
	free(qconf.encryption_key);
	free(qconf.encryption_key_previous);
	qconf.encryption_key = strdup(key);
	qconf.encryption_key_previous = strdup(previous);
	pcrypt_start();
	pcrypt_note("enc", 1);
}

int
main(void)
{
	static const char *const payloads[] = {
		"{\"n\":123456789012345678901234567890,\"f\":1.10,\"d\":1,\"d\":2}",
		"[1, 2,\n 3]", "\"\\u0000 and \\u00e9\"", "null", "-0.5e-7",
	};
	char *env, *out, want[512];

	start(key1, "");
	env = NULL;
	ok(pcrypt_seal_for("plain", "{}", 2, &env) == QE_OK && env == NULL,
	   "a queue not in the set is not sealed");
	for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++) {
		env = seal(payloads[i]);
		ok(env && strncmp(env, "{\"encrypted\":\"", 14) == 0, "sealed: %s", env);
		out = reveal(env);
		is_str(out, payloads[i], "a pop returns the payload byte for byte");
		free(out);
		out = reveal_in_doc(env);
		snprintf(want, sizeof(want), "{\"messages\": [{\"id\": 1, \"data\": %s}, {\"id\": 2, "
			 "\"data\": %s}], \"encrypted\": \"a key of the view\"}", payloads[i],
			 payloads[i]);
		is_str(out, want, "a read view returns it byte for byte, wherever it is");
		free(out);
		free(env);
	}

	/* What is not exactly an envelope is returned as it is. */
	env = seal("{\"a\":1}");
	{
		const char *iv = strstr(env, "\"iv\"");
		char extra[512], dup[512], nonstr[512];

		snprintf(extra, sizeof(extra), "%.*s,\"x\":1}", (int)(strlen(env) - 1), env);
		snprintf(dup, sizeof(dup), "%.*s,%.*s", (int)(strlen(env) - 1), env,
			 (int)(strlen(iv)), iv);
		snprintf(nonstr, sizeof(nonstr), "{\"encrypted\":1,%s", iv);
		out = reveal(extra);
		is_str(out, extra, "a fourth member: not an envelope");
		free(out);
		out = reveal(dup);
		is_str(out, dup, "a repeated member: not an envelope");
		free(out);
		out = reveal(nonstr);
		is_str(out, nonstr, "a member that is not a string: not an envelope");
		free(out);
		/* The same envelope with its first base64 character written as \u00XX. */
		snprintf(extra, sizeof(extra), "{\"encrypted\":\"\\u%04x%s", (unsigned char)env[14],
			 env + 15);
		out = reveal(extra);
		is_str(out, "{\"a\":1}", "an escape inside the base64 is decoded first");
		free(out);
		/* Looked at from its first member on: an envelope begins with one of its own. */
		snprintf(extra, sizeof(extra), "{ %.*s,%.*s}", (int)(strlen(iv) - 1), iv,
			 (int)(iv - env - 2), env + 1);
		out = reveal(extra);
		is_str(out, "{\"a\":1}", "its members in another order, after a space: opened");
		free(out);
		snprintf(extra, sizeof(extra), "{\"x\":1,%s", env + 1);
		out = reveal(extra);
		is_str(out, extra, "a first member of another name: not an envelope");
		free(out);
		out = reveal("{\"encrypted\":\"x\",\"iv\":");
		is_str(out, "{\"encrypted\":\"x\",\"iv\":", "invalid JSON is left alone");
		free(out);
	}

	/* Rotation: a previous key opens; without it the envelope is marked. */
	pcrypt_stop();
	start(key2, key1);
	out = reveal(env);
	is_str(out, "{\"a\":1}", "a previous key opens what it sealed");
	free(out);
	pcrypt_stop();
	start(key2, "");
	out = reveal(env);
	snprintf(want, sizeof(want), "%.*s,\"isEncrypted\":true}", (int)(strlen(env) - 1), env);
	is_str(out, want, "no key opens it: the envelope marked isEncrypted");
	free(out);
	out = reveal_in_doc(env);
	ok(out && strstr(out, want) != NULL, "... in a read view too");
	free(out);
	free(env);

	/* A tampered ciphertext does not open. */
	pcrypt_stop();
	start(key1, "");
	env = seal("{\"a\":1}");
	env[14] = env[14] == 'A' ? 'B' : 'A';
	out = reveal(env);
	ok(out && strstr(out, "\"isEncrypted\":true") != NULL, "a changed ciphertext: marked");
	free(out);
	free(env);
	pcrypt_stop();
	free(qconf.encryption_key);
	free(qconf.encryption_key_previous);
	return tap_done();
}
