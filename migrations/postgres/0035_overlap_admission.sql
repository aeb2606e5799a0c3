-- The overlap rule's admission (host/src/store/overlap.rs): the fencing
-- token under which a scheduled trigger's run was admitted by its job's
-- overlap policy, NULL until then. A claim of a queued trigger clears it
-- (a retry or a resume is judged again); a takeover of a running one keeps
-- it (the run it takes over was admitted, and was in flight all along).
-- Every running trigger with a token counts against its job's
-- max_in_flight, whether or not its holder is alive.
ALTER TABLE triggers ADD COLUMN overlap_token BIGINT;
