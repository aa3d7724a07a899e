"""The one place that reads the environment: `ETL_*` variables into a frozen `Config`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/etl"


@dataclass(frozen=True)
class Config:
    database_url: str = DEFAULT_DATABASE_URL
    sandbox_url: str = DEFAULT_DATABASE_URL
    data_dir: Path = Path("fixtures")
    export_dir: Path = Path("var/exports")
    reject_dir: Path = Path("var/rejects")
    api_bind: str = "127.0.0.1:8080"
    admin_token: str | None = None
    lease_ttl_s: float = 30.0
    heartbeat_s: float = 10.0
    sweep_s: float = 2.0
    step_timeout_s: float = 300.0
    api_workers: int = 2
    fault: str | None = None  # fault injection for drills and tests, off by default
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        """Build the configuration from `env` (default: `os.environ`); no side effects."""
        env = os.environ if env is None else env
        db = env.get("ETL_DATABASE_URL", DEFAULT_DATABASE_URL)
        return cls(
            database_url=db,
            sandbox_url=env.get("ETL_SANDBOX_URL", db),
            data_dir=Path(env.get("ETL_DATA_DIR", "./fixtures")).absolute(),
            export_dir=Path(env.get("ETL_EXPORT_DIR", "./var/exports")).absolute(),
            reject_dir=Path(env.get("ETL_REJECT_DIR", "./var/rejects")).absolute(),
            api_bind=env.get("ETL_API_BIND", "127.0.0.1:8080"),
            admin_token=env.get("ETL_ADMIN_TOKEN") or None,
            lease_ttl_s=float(env.get("ETL_LEASE_TTL_S", "30")),
            heartbeat_s=float(env.get("ETL_HEARTBEAT_S", "10")),
            sweep_s=float(env.get("ETL_SWEEP_S", "2")),
            step_timeout_s=float(env.get("ETL_STEP_TIMEOUT_S", "300")),
            api_workers=int(env.get("ETL_API_WORKERS", "2")),
            fault=env.get("ETL_FAULT") or None,
            log_level=env.get("ETL_LOG_LEVEL", "INFO"),
        )
