"""Purging what finished runs leave behind (intermediate outputs, staging, chunk folders) once
the retention lets them go: the wiring of `actors.purge` to the configured directories and
the sandbox, shared by the coordinator's sweep and `etl purge`."""

from __future__ import annotations

from actors import PurgeReport, purge_finished_runs
from ddl import connector
from service.config import Config


def purge_sandbox(cfg: Config):
    """The sandbox connector of purges (short statements)."""
    return connector(cfg.sandbox_url, "etl-purge", statement_timeout_s=10)


def purge_runs(cfg: Config, conn, *, older_than_days: float, limit: int | None) -> PurgeReport:
    """Purge the intermediate outputs of runs that finished at least `older_than_days` ago
    (at most `limit` runs; all of them when None)."""
    return purge_finished_runs(
        conn,
        older_than_s=older_than_days * 86400,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        connect_sandbox=purge_sandbox(cfg),
        limit=limit,
    )
