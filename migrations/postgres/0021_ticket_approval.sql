-- The two-person rule (issue 18 item 5): a high-risk resolution of an
-- exception ticket (`resend`, `mark_succeeded`; model/tickets.rs) is
-- first proposed by one operator and runs only when a different one
-- approves it. The proposal sits on the open ticket; approving resolves
-- the ticket as before (resolved_by = the approver), rejecting clears it.
ALTER TABLE exceptions ADD COLUMN proposed_action TEXT;
ALTER TABLE exceptions ADD COLUMN proposed_by TEXT;
ALTER TABLE exceptions ADD COLUMN proposed_reason TEXT;
ALTER TABLE exceptions ADD COLUMN proposed_at BIGINT;
