-- One index for every question about running triggers (issue 16: quotas
-- cost 0.82-0.87x of no quotas, most of it index upkeep on each state
-- change). Before: a claimed version added three entries to answer three
-- questions — `triggers_lease (lease_until)` (the lapsed-lease walk),
-- `triggers_running (resource_group, tenant)` (each group's and tenant's
-- running count) and `triggers_recovering (resource_group)` (the recovery
-- lane's running count, recovery rows only). Now one entry answers all:
--  * a group's running count: a range of the leading column;
--  * a tenant's in a group: a range of the first two;
--  * a group's recovery lane: the group's range, filtered on `recovery`
--    in the index (at most the group's limit plus lapsed leases);
--  * lapsed leases: every running entry filtered on `lease_until` in the
--    index, then the few lapsed sorted — the running set is bounded by the
--    groups' limits, the backlog never enters.
-- The predicate keeps 0008's `lease_until IS NOT NULL` (a running trigger
-- always has a lease, so the rows are the same), so that only the primary
-- key reaches a fenced write's rows; the queries spell it
-- (`running_rows!` in store/runner/claim.rs) so the index serves them.
DROP INDEX IF EXISTS triggers_lease;
DROP INDEX IF EXISTS triggers_running;
DROP INDEX IF EXISTS triggers_recovering;
CREATE INDEX triggers_running ON triggers (resource_group, tenant, recovery, lease_until)
    WHERE state = 'running' AND lease_until IS NOT NULL;
