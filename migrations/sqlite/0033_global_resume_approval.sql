-- The two-person rule for resuming the global pause (host/src/model/tickets.rs,
-- host/src/store/gates/second.rs): the first resume of the closed global
-- gate is a proposal kept on its row and changes nothing; the gate reopens
-- when a different authenticated person resumes it too. Existing rows keep
-- no proposal: a global gate closed before this migration needs both
-- people from now on.
ALTER TABLE gates ADD COLUMN resume_proposed_by TEXT;
ALTER TABLE gates ADD COLUMN resume_proposed_reason TEXT;
ALTER TABLE gates ADD COLUMN resume_proposed_at INTEGER;
