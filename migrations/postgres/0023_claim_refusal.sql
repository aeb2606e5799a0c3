-- How a claim that chose its batch without the claims' lock refuses to
-- commit it (issue 16; see host/src/store/runner/postgres.rs, "The
-- claim"). Such a claim takes the lock only to check, under it, that its
-- batch left every group and tenant within its limits, and commits in the
-- same round trip: its check raises this error when a limit was passed
-- (another process's claim committed in between), so the COMMIT after it
-- never runs and the claim rolls back and claims again under the lock.
-- The SQLSTATE is the claim's own, so nothing else is taken for a refusal.
CREATE FUNCTION paddock_refuse_claim(why TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'claim refused: %', why USING ERRCODE = 'PD001';
END
$$;
