-- Manual handling (host/src/model/state.rs, store/held.rs): an open
-- exception ticket that owns a trigger holds it in `manual` until it is
-- resolved. Mirrors migrations/postgres/0029_manual_handling.sql.
--
-- 1. Every finish, approval and resolution asks whether an open ticket
--    owns the trigger: one probe of this index, whose entries are the open
--    tickets only.
CREATE INDEX exceptions_open_trigger ON exceptions (trigger_id) WHERE state = 'open';

-- 2. Triggers that were left waiting for a retry (or due) while a ticket
--    about one of their effects is open now wait for the ticket, as a new
--    ticket would have held them. Running ones are held when their attempt
--    ends; final ones stay final.
UPDATE triggers SET state = 'manual', updated_at = CAST(unixepoch('subsec') * 1000 AS INTEGER)
    WHERE state IN ('pending', 'retry_wait')
      AND EXISTS (SELECT 1 FROM exceptions e WHERE e.trigger_id = triggers.id AND e.state = 'open');
