-- 024_segments_covering_pkey.sql: the log end of a partition without its newest segment's row.
--
-- The newest segment of a partition gives its log end (queen_log_tail): its end_offset and
-- created_at.  Read through the primary key, each such probe fetched the segment's row,
-- payloads and all, from the heap: the index snapshot a broker loads at start-up does it for
-- every partition, and a million one-message segments are a gigabyte of heap.  Carried in
-- the key's leaf entries, the two columns come from the index alone wherever the heap page
-- is known all-visible, as VACUUM leaves settled segments.
ALTER TABLE queen_segments
	DROP CONSTRAINT queen_segments_pkey,
	ADD CONSTRAINT queen_segments_pkey PRIMARY KEY (partition_id, base_offset)
		INCLUDE (end_offset, created_at);
