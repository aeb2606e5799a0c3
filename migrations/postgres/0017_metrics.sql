-- Metrics (issue 19): triggers parked for a person (state 'manual', by a
-- misfire policy) counted per group and tenant at every scrape of
-- /metrics without reading the table. The other states a scrape counts
-- already have a partial index of their own (triggers_pending,
-- triggers_recovery, triggers_running); this one holds only parked rows,
-- so claims and commits never touch it.
CREATE INDEX triggers_parked ON triggers (resource_group, tenant) WHERE state = 'manual';
