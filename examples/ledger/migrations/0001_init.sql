-- Paddock reference ledger: resources and the record of applied operations.

CREATE TABLE resources (
    name                  TEXT    PRIMARY KEY,
    balance               INTEGER NOT NULL CHECK (balance >= 0),
    -- Highest Fencing-Token any accepted request for this resource presented;
    -- NULL until a request carries one.
    highest_fencing_token INTEGER,
    created_at            TEXT    NOT NULL,
    updated_at            TEXT    NOT NULL
);

-- One row per idempotency key: the first accepted request's outcome, which
-- every later request with the same key and digest gets back verbatim.
CREATE TABLE operations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT    NOT NULL UNIQUE,
    resource        TEXT    NOT NULL REFERENCES resources (name),
    action          TEXT    NOT NULL,
    params_digest   TEXT    NOT NULL,
    request_body    TEXT    NOT NULL,
    outcome         TEXT    NOT NULL CHECK (outcome IN ('applied', 'rejected')),
    status          INTEGER NOT NULL,
    response_body   TEXT    NOT NULL,
    fencing_token   INTEGER,
    request_id      TEXT,
    recorded_at     TEXT    NOT NULL
);

CREATE INDEX operations_resource ON operations (resource, id);
