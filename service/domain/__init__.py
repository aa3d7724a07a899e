"""The domain: every operation on the coordinator's state, one module per entity (pipelines,
runs, schedules, principals, sessions, audit, listing, preview, metrics) over the named SQL
of `sql/`. Each function takes the caller's cursor and runs in the caller's transaction; the
faces (`service.api`, `service.console`, `service.cli`, `service.scheduler`) call it and
own nothing of the database."""

__all__: list[str] = []
