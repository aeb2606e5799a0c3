-- Nothing on PostgreSQL. SQLite's 0025 makes `trigger_id_blocks`, so that
-- new triggers take ids in blocks per tenant and one tenant's triggers lie
-- together in SQLite's table, which is stored in id order
-- (host/src/store/trigger_ids.rs). PostgreSQL's heap keeps rows in the
-- order they are inserted, whatever their ids; its triggers keep taking
-- ids from the table's sequence. The migration exists so both databases
-- count the same migrations.
SELECT 1;
