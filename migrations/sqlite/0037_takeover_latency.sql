-- Attempts a takeover closed (`expired`), by when: `paddock status` and
-- `/metrics` read each one's latency (its successor's start less its
-- lease's end) over a window without walking every attempt.
CREATE INDEX attempts_expired ON attempts (ended_at) WHERE outcome = 'expired';
