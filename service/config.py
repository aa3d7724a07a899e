"""The one place that reads the environment: `ETL_*` variables into a frozen `Config`, and of
the standard `OTEL_*` ones whether OTLP export is on (the SDK reads the rest itself)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/etl"


class ConfigError(ValueError):
    """An `ETL_*` variable with a value that cannot be used; the message names it."""


@dataclass(frozen=True)
class Config:
    database_url: str = DEFAULT_DATABASE_URL
    sandbox_url: str = DEFAULT_DATABASE_URL
    listen_url: str = DEFAULT_DATABASE_URL  # the broker's consumers: LISTEN, session locks
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
    retention_days: float = 7.0  # a finished run's intermediate outputs are purged after this
    api_url: str = "http://127.0.0.1:8080"  # where the `etl` API client commands connect
    token: str | None = None  # the bearer token of the `etl` API client commands
    fusion: bool = True  # stage fusion: a step's followers run in one pass with it
    overlap: bool = True  # a batch commits while the executor computes the next one
    tracing: bool = False  # OTLP export of spans (an OTEL_EXPORTER_OTLP_*ENDPOINT is set)
    otel_service_name: str | None = None  # OTEL_SERVICE_NAME; None: each process kind's
    public_url: str = "http://127.0.0.1:8080"  # the console's base in webhook bodies' links
    webhook_timeout_s: float = 5.0  # one webhook POST: connect + answer
    webhook_max_attempts: int = 20  # then the delivery is given up (failed, audited)
    webhook_backoff_s: float = 1.0  # the delay after the first failed attempt, doubling
    webhook_backoff_max_s: float = 3600.0  # the cap of that delay

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        """Build the configuration from `env` (default: `os.environ`); no side effects."""
        env = os.environ if env is None else env
        db = env.get("ETL_DATABASE_URL", DEFAULT_DATABASE_URL)
        bind = env.get("ETL_API_BIND", "127.0.0.1:8080")
        return cls(
            database_url=db,
            sandbox_url=env.get("ETL_SANDBOX_URL", db),
            listen_url=env.get("ETL_LISTEN_URL", db),
            data_dir=Path(env.get("ETL_DATA_DIR", "./fixtures")).absolute(),
            export_dir=Path(env.get("ETL_EXPORT_DIR", "./var/exports")).absolute(),
            reject_dir=Path(env.get("ETL_REJECT_DIR", "./var/rejects")).absolute(),
            api_bind=bind,
            admin_token=env.get("ETL_ADMIN_TOKEN") or None,
            lease_ttl_s=_number(env, "ETL_LEASE_TTL_S", float, "30"),
            heartbeat_s=_number(env, "ETL_HEARTBEAT_S", float, "10"),
            sweep_s=_number(env, "ETL_SWEEP_S", float, "2"),
            step_timeout_s=_number(env, "ETL_STEP_TIMEOUT_S", float, "300"),
            api_workers=_number(env, "ETL_API_WORKERS", int, "2"),
            fault=env.get("ETL_FAULT") or None,
            log_level=env.get("ETL_LOG_LEVEL", "INFO"),
            retention_days=_number(env, "ETL_RETENTION_DAYS", float, "7", minimum=0),
            api_url=env.get("ETL_API_URL") or f"http://{bind}",
            token=env.get("ETL_TOKEN") or None,
            fusion=_flag(env, "ETL_FUSION", True),
            overlap=_flag(env, "ETL_OVERLAP", True),
            tracing=_tracing(env),
            otel_service_name=env.get("OTEL_SERVICE_NAME") or None,
            public_url=(env.get("ETL_PUBLIC_URL") or f"http://{bind}").rstrip("/"),
            webhook_timeout_s=_number(env, "ETL_WEBHOOK_TIMEOUT_S", float, "5", minimum=0.1),
            webhook_max_attempts=_number(env, "ETL_WEBHOOK_MAX_ATTEMPTS", int, "20", minimum=1),
            webhook_backoff_s=_number(env, "ETL_WEBHOOK_BACKOFF_S", float, "1", minimum=0.01),
            webhook_backoff_max_s=_number(
                env, "ETL_WEBHOOK_BACKOFF_MAX_S", float, "3600", minimum=0.01
            ),
        )


def _tracing(env: Mapping[str, str]) -> bool:
    """OTLP export is on when an endpoint is set (all signals' or the traces' own) and the
    SDK is not disabled (`OTEL_SDK_DISABLED=true`) nor the traces exporter `none`."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    exporter = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    return bool(endpoint and endpoint.strip()) and not disabled and exporter != "none"


def _number(
    env: Mapping[str, str], name: str, kind: type, default: str, *, minimum: float | None = None
):
    """`env[name]` (or `default`) as an int or float; a bad value is a `ConfigError` naming
    the variable, not a bare conversion error."""
    raw = env.get(name, default)
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(
            f"{name}: expected {'an integer' if kind is int else 'a number'}, got {raw!r}"
        ) from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}: expected a finite number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}: must be >= {minimum:g}, got {raw!r}")
    return value


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """`env[name]` as a boolean: 1/true/yes/on or 0/false/no/off (any case)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: expected 1/true/yes/on or 0/false/no/off, got {raw!r}")
