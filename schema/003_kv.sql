-- 003_kv.sql: key/value state (SPEC.md 13, 21).
--
-- One row per live (or expired, not yet pruned) key, keyed by (ns, key) so the table can be
-- distributed by ns.  A delete removes the row; nothing else is kept per key.
--
-- Versions are fencing tokens: they come from one sequence (CACHE 1, so every nextval is
-- larger than every value handed out before it), and a write takes its version after it holds
-- the key's row lock (or inserts the row).  Hence the versions of one key strictly increase
-- across every write, delete and re-create and expiry pruning, without tombstones; like etcd's
-- mod_revision, they are not consecutive per key.  0 is never a version: `expect: 0` means
-- "must not exist".
--
-- Expired rows read as absent everywhere (expires_at <= now()); queen_kv_prune removes them in
-- bounded batches from the maintenance thread.  Keys compare bytewise (COLLATE "C"), which is
-- the order of getPrefix.
--
-- queen_kv_apply() applies a list of ops (the JSON the client sent, validated by the broker)
-- in the caller's transaction; queen_kv() is the standalone route, which undoes everything
-- when a `required` op loses its precondition.

CREATE SEQUENCE queen_kv_version AS bigint MINVALUE 1 START 1 CACHE 1;

CREATE TABLE queen_kv (
	ns				text COLLATE "C" NOT NULL,
	key				text COLLATE "C" NOT NULL,
	value				jsonb NOT NULL,		-- JSON null is 'null'::jsonb
	version				bigint NOT NULL,	-- nextval('queen_kv_version')
	expires_at			timestamptz,		-- NULL = forever
	updated_at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (ns, key)
);
-- Writes that keep the expiry (forever keys) stay HOT.
ALTER TABLE queen_kv SET (fillfactor = 80);
CREATE INDEX queen_kv_expiry ON queen_kv (expires_at) WHERE expires_at IS NOT NULL;
