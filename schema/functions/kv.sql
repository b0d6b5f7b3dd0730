-- kv.sql: key/value state (SPEC.md 13), standalone and inside transactions.

-- The live row of (ns, key) as a get result body (without index and op).
CREATE FUNCTION queen_kv_get(p_ns text, p_key text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT coalesce(
		(SELECT jsonb_build_object('found', true, 'key', p_key, 'value', k.value,
			'version', k.version, 'expiresAt', queen_ts(k.expires_at),
			'updatedAt', queen_ts(k.updated_at))
		 FROM queen_kv k
		 WHERE k.ns = p_ns AND k.key = p_key
		   AND (k.expires_at IS NULL OR k.expires_at > now())),
		jsonb_build_object('found', false, 'key', p_key, 'value', NULL, 'version', NULL,
			'expiresAt', NULL, 'updatedAt', NULL))
$$;

-- getMany: rows of the live keys, in the order they were first named, and the missing ones.
CREATE FUNCTION queen_kv_get_many(p_ns text, p_keys jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	WITH want AS (
		SELECT kk AS key, min(ord) AS ord
		FROM jsonb_array_elements_text(p_keys) WITH ORDINALITY AS t(kk, ord)
		GROUP BY kk
	), got AS (
		SELECT w.key, w.ord, k.value, k.version
		FROM want w
		LEFT JOIN queen_kv k ON k.ns = p_ns AND k.key = w.key
			AND (k.expires_at IS NULL OR k.expires_at > now())
	)
	SELECT jsonb_build_object(
		'rows', coalesce((SELECT jsonb_agg(jsonb_build_object('key', g.key, 'value', g.value,
				'version', g.version) ORDER BY g.ord)
			FROM got g WHERE g.version IS NOT NULL), '[]'::jsonb),
		'missing', coalesce((SELECT jsonb_agg(g.key ORDER BY g.ord)
			FROM got g WHERE g.version IS NULL), '[]'::jsonb))
$$;

-- getPrefix: live keys starting with p_prefix, after p_after (exclusive), in key order, at
-- most p_limit of them.  The scan starts at the prefix and stops at the first key past it.
CREATE FUNCTION queen_kv_get_prefix(p_ns text, p_prefix text, p_after text, p_limit int)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
	rec record;
	rows jsonb[] := '{}';
	last text;
	truncated bool := false;
	lim int := least(greatest(coalesce(p_limit, 100), 1), 1000);
	start text := CASE WHEN p_after IS NOT NULL AND p_after COLLATE "C" > p_prefix COLLATE "C"
			THEN p_after ELSE p_prefix END;
BEGIN
	FOR rec IN
		SELECT k.key, k.value, k.version
		FROM queen_kv k
		WHERE k.ns = p_ns AND k.key >= start
		  AND (p_after IS NULL OR k.key > p_after)
		  AND (k.expires_at IS NULL OR k.expires_at > now())
		ORDER BY k.key
	LOOP
		EXIT WHEN NOT starts_with(rec.key, p_prefix);
		IF cardinality(rows) >= lim THEN
			truncated := true;
			EXIT;
		END IF;
		rows := rows || jsonb_build_object('key', rec.key, 'value', rec.value,
						   'version', rec.version);
		last := rec.key;
	END LOOP;
	RETURN jsonb_build_object('rows', to_jsonb(rows), 'truncated', truncated,
				  'nextAfter', CASE WHEN truncated THEN last END);
END
$$;

-- One write (put, putIfAbsent, incr, delete) under the key's row lock.  p_expect NULL = no
-- version precondition, 0 = must not exist.  Returns the result body (without index and op):
-- applied, reason when not applied, key, version (the new one; for a delete the one removed;
-- the current one when not applied) and value (incr's counter, or the current value when not
-- applied).
CREATE FUNCTION queen_kv_write(p_op text, p_ns text, p_key text, p_value jsonb,
			       p_expires timestamptz, p_expect bigint, p_delta numeric, p_max numeric)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	cur_value jsonb;
	cur_version bigint;
	cur_expires timestamptz;
	have_row bool;
	live bool;
	new_value jsonb;
	counter numeric;
	v bigint;
BEGIN
	LOOP
		SELECT k.value, k.version, k.expires_at INTO cur_value, cur_version, cur_expires
		FROM queen_kv k WHERE k.ns = p_ns AND k.key = p_key FOR UPDATE;
		have_row := FOUND;
		live := have_row AND (cur_expires IS NULL OR cur_expires > now());
		IF NOT live THEN
			cur_value := NULL;
			cur_version := NULL;
		END IF;

		IF p_expect IS NOT NULL AND coalesce(cur_version, 0) <> p_expect THEN
			RETURN jsonb_build_object('applied', false, 'reason', 'version', 'key', p_key,
						  'version', cur_version, 'value', cur_value);
		END IF;
		IF p_op = 'putIfAbsent' AND live THEN
			RETURN jsonb_build_object('applied', false, 'reason', 'exists', 'key', p_key,
						  'version', cur_version, 'value', cur_value);
		END IF;

		IF p_op = 'delete' THEN
			IF have_row THEN
				DELETE FROM queen_kv k WHERE k.ns = p_ns AND k.key = p_key;
			END IF;
			IF NOT live THEN
				RETURN jsonb_build_object('applied', false, 'reason', 'absent',
							  'key', p_key, 'version', NULL);
			END IF;
			RETURN jsonb_build_object('applied', true, 'key', p_key, 'version', cur_version);
		END IF;

		IF p_op = 'incr' THEN
			IF live AND jsonb_typeof(cur_value) <> 'number' THEN
				RETURN jsonb_build_object('applied', false, 'reason', 'not_a_number',
							  'key', p_key, 'version', cur_version,
							  'value', cur_value);
			END IF;
			counter := coalesce(cur_value::numeric, 0) + p_delta;
			IF p_max IS NOT NULL AND counter > p_max THEN
				RETURN jsonb_build_object('applied', false, 'reason', 'limit',
							  'key', p_key, 'version', cur_version,
							  'value', coalesce(cur_value, '0'::jsonb));
			END IF;
			new_value := to_jsonb(counter);
		ELSE
			new_value := p_value;
		END IF;

		v := nextval('queen_kv_version');
		IF have_row THEN
			UPDATE queen_kv k SET value = new_value, version = v, expires_at = p_expires,
				updated_at = now()
			WHERE k.ns = p_ns AND k.key = p_key;
		ELSE
			INSERT INTO queen_kv (ns, key, value, version, expires_at, updated_at)
			VALUES (p_ns, p_key, new_value, v, p_expires, now())
			ON CONFLICT (ns, key) DO NOTHING;
			-- A concurrent writer created the key first: lock its row and judge again.
			CONTINUE WHEN NOT FOUND;
		END IF;
		IF p_op = 'incr' THEN
			RETURN jsonb_build_object('applied', true, 'key', p_key, 'version', v,
						  'value', new_value);
		END IF;
		RETURN jsonb_build_object('applied', true, 'key', p_key, 'version', v);
	END LOOP;
END
$$;

-- Applies p_ops (a JSON array of ops, SPEC.md 13) in order in the current transaction.
-- Returns {"ok":true,"results":[...]} aligned with the input, or, as soon as an op with
-- "required":true is not applied, {"ok":false,"reason":"kv_precondition","failedIndex":N,
-- "kvReason":..., "op", "key", "version", "value"}: the writes of earlier ops are then still
-- in the transaction and the caller must roll it back.  getPrefix only when p_standalone.
-- The broker validates ops first (types, limits, ttlSeconds xor forever); what reaches here
-- malformed raises.
CREATE FUNCTION queen_kv_apply(p_ops jsonb, p_standalone bool) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	o jsonb;
	idx bigint;
	kind text;
	r jsonb;
	ttl numeric;
	expires timestamptz;
	results jsonb[] := '{}';
BEGIN
	IF jsonb_typeof(p_ops) IS DISTINCT FROM 'array' THEN
		RAISE EXCEPTION 'queen_kv_apply: ops must be a JSON array';
	END IF;
	FOR o, idx IN SELECT e, n - 1 FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS t(e, n)
	LOOP
		kind := o->>'op';
		IF kind IN ('put', 'putIfAbsent', 'incr') THEN
			ttl := (o->>'ttlSeconds')::numeric;
			IF (ttl IS NULL) = ((o->'forever') IS DISTINCT FROM 'true'::jsonb) THEN
				RAISE EXCEPTION 'queen_kv_apply: op % needs exactly one of ttlSeconds '
					'or forever', idx;
			END IF;
			expires := CASE WHEN ttl IS NOT NULL
				THEN now() + make_interval(secs => ttl::double precision) END;
		END IF;
		CASE kind
		WHEN 'get' THEN
			r := queen_kv_get(o->>'ns', o->>'key');
		WHEN 'getMany' THEN
			r := queen_kv_get_many(o->>'ns', coalesce(o->'keys', '[]'::jsonb));
		WHEN 'getPrefix' THEN
			IF NOT p_standalone THEN
				RAISE EXCEPTION 'queen_kv_apply: getPrefix is not allowed here';
			END IF;
			r := queen_kv_get_prefix(o->>'ns', coalesce(o->>'prefix', ''), o->>'after',
						 (o->>'limit')::numeric::int);
		WHEN 'put', 'putIfAbsent' THEN
			IF o->'value' IS NULL THEN
				RAISE EXCEPTION 'queen_kv_apply: op % has no value', idx;
			END IF;
			r := queen_kv_write(kind, o->>'ns', o->>'key', o->'value', expires,
					    CASE WHEN kind = 'put'
						 THEN (o->>'expect')::numeric::bigint END,
					    NULL, NULL);
		WHEN 'incr' THEN
			r := queen_kv_write(kind, o->>'ns', o->>'key', NULL, expires,
					    (o->>'expect')::numeric::bigint,
					    coalesce((o->>'delta')::numeric, 1), (o->>'max')::numeric);
		WHEN 'delete' THEN
			r := queen_kv_write(kind, o->>'ns', o->>'key', NULL, NULL,
					    (o->>'expect')::numeric::bigint, NULL, NULL);
		ELSE
			RAISE EXCEPTION 'queen_kv_apply: unknown op %', coalesce(kind, 'null');
		END CASE;
		IF (r->'applied') = 'false'::jsonb AND (o->'required') = 'true'::jsonb THEN
			RETURN jsonb_build_object('ok', false, 'reason', 'kv_precondition',
				'failedIndex', idx, 'kvReason', r->'reason', 'op', kind,
				'key', r->'key', 'version', r->'version',
				'value', coalesce(r->'value', 'null'::jsonb));
		END IF;
		results := results || (jsonb_build_object('index', idx, 'op', kind) || r);
	END LOOP;
	RETURN jsonb_build_object('ok', true, 'results', to_jsonb(results));
END
$$;

-- The standalone route (POST /api/v1/kv and its sugar): queen_kv_apply in a subtransaction
-- when some op is required, so a lost precondition leaves nothing written.  Without required
-- ops there is nothing to undo and no subtransaction is paid for.
CREATE FUNCTION queen_kv(p_ops jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	res jsonb;
BEGIN
	IF NOT jsonb_path_exists(p_ops, '$[*] ? (@.required == true)') THEN
		RETURN queen_kv_apply(p_ops, true);
	END IF;
	BEGIN
		res := queen_kv_apply(p_ops, true);
		IF (res->'ok') = 'false'::jsonb THEN
			RAISE EXCEPTION USING ERRCODE = 'QK001', MESSAGE = 'kv precondition lost';
		END IF;
	EXCEPTION WHEN SQLSTATE 'QK001' THEN
		-- Local variables survive the rollback of the block: answer the failure.
		RETURN res;
	END;
	RETURN res;
END
$$;

-- Deletes up to p_batch expired keys (never waiting on a key a writer holds); returns how many.
CREATE FUNCTION queen_kv_prune(p_batch int) RETURNS int
LANGUAGE sql AS $$
	WITH doomed AS (
		SELECT k.ns, k.key FROM queen_kv k
		WHERE k.expires_at IS NOT NULL AND k.expires_at <= now()
		ORDER BY k.expires_at
		LIMIT p_batch
		FOR UPDATE SKIP LOCKED
	), gone AS (
		DELETE FROM queen_kv k USING doomed d
		WHERE k.ns = d.ns AND k.key = d.key
		RETURNING 1
	)
	SELECT count(*)::int FROM gone
$$;
