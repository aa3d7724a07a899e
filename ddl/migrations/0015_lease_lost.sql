-- A batch's commit that finds a lease no longer ours fails as a whole (issue 19): the
-- executor sends a batch's staging rows and its checkpoint as ONE query, committed by the
-- server as one implicit transaction, so the commit statement (`actors/sql/queries.sql`,
-- `commit_batch`) must raise, not just return no row, for the rest to roll back with it.
-- SQLSTATE EL001 is the executor's `LeaseLost`.
CREATE FUNCTION etl_lease_lost(owner text, attempt_ids bigint[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'attempts %: a lease is no longer held by %', attempt_ids, owner
        USING ERRCODE = 'EL001';
END $$;
