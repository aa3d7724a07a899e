"""The one place that reads the environment: `ETL_*` variables into a frozen `Config`, and of
the standard `OTEL_*` ones whether OTLP export is on (the SDK reads the rest itself)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/etl"


class ConfigError(ValueError):
    """An `ETL_*` variable with a value that cannot be used; the message names it."""


def _number(name: str, raw: str, kind: type, minimum: float | None) -> Any:
    """`raw` as an int or float; a bad value is a `ConfigError` naming the variable, not a
    bare conversion error."""
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


def _flag(name: str, raw: str) -> bool:
    """`raw` as a boolean: 1/true/yes/on or 0/false/no/off (any case)."""
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: expected 1/true/yes/on or 0/false/no/off, got {raw!r}")


def _trace_url(template: str | None) -> str | None:
    """`ETL_TRACE_URL`: an http(s) URL holding `{trace_id}` once, or nothing."""
    if template is None:
        return None
    if not template.startswith(("http://", "https://")) or template.count("{trace_id}") != 1:
        raise ConfigError(
            f"ETL_TRACE_URL: expected an http:// or https:// URL with {{trace_id}} once"
            f" (e.g. http://127.0.0.1:16686/trace/{{trace_id}}), got {template!r}"
        )
    return template


def _var(
    env: str,
    default: str | None,
    read: Callable[[str, str], Any] = lambda _n, raw: raw,
    *,
    fallback: Callable[[dict[str, Any]], Any] | None = None,
    empty_is_unset: bool = False,
) -> Any:
    """A field read from the variable `env`: `read(env, raw)` parses its value (or
    `default`, or, when unset and given, `fallback` of the fields read before it; an empty
    value counts as unset where a fallback or `empty_is_unset` says so). The field's own
    default, used by `Config(...)` in code, is `default` read the same way."""
    value = None if default is None else read(env, default)
    empty_is_unset = empty_is_unset or fallback is not None
    return field(
        default=value,
        metadata={
            "env": env,
            "raw": default,
            "read": read,
            "fallback": fallback,
            "empty_is_unset": empty_is_unset,
        },
    )


def _text(_name: str, raw: str) -> str | None:
    return raw or None


def _path(_name: str, raw: str) -> Path:
    return Path(raw)


def _float(minimum: float | None = None) -> Callable[[str, str], float]:
    return lambda name, raw: _number(name, raw, float, minimum)


def _int(minimum: float | None = None) -> Callable[[str, str], int]:
    return lambda name, raw: _number(name, raw, int, minimum)


def _bind_url(read: dict[str, Any]) -> str:
    return f"http://{read['api_bind']}"


@dataclass(frozen=True)
class Config:
    """Every setting, each declared once: its variable, default and parser
    (docs/configuration.md)."""

    database_url: str = _var("ETL_DATABASE_URL", DEFAULT_DATABASE_URL)
    sandbox_url: str = _var(
        "ETL_SANDBOX_URL", DEFAULT_DATABASE_URL, fallback=lambda read: read["database_url"]
    )
    # what LISTENs (the broker's consumers, the webhook notifier): a direct session, not a
    # transaction pooler's
    listen_url: str = _var(
        "ETL_LISTEN_URL", DEFAULT_DATABASE_URL, fallback=lambda read: read["database_url"]
    )
    data_dir: Path = _var("ETL_DATA_DIR", "fixtures", _path)
    export_dir: Path = _var("ETL_EXPORT_DIR", "var/exports", _path)
    reject_dir: Path = _var("ETL_REJECT_DIR", "var/rejects", _path)
    api_bind: str = _var("ETL_API_BIND", "127.0.0.1:8080")
    admin_token: str | None = _var("ETL_ADMIN_TOKEN", None, _text)
    lease_ttl_s: float = _var("ETL_LEASE_TTL_S", "30", _float())
    heartbeat_s: float = _var("ETL_HEARTBEAT_S", "10", _float())
    sweep_s: float = _var("ETL_SWEEP_S", "2", _float())
    step_timeout_s: float = _var("ETL_STEP_TIMEOUT_S", "300", _float())
    api_workers: int = _var("ETL_API_WORKERS", "2", _int())
    fault: str | None = _var("ETL_FAULT", None, _text)  # fault injection, off by default
    log_level: str = _var("ETL_LOG_LEVEL", "INFO")
    # a finished run's intermediate outputs are purged after this
    retention_days: float = _var("ETL_RETENTION_DAYS", "7", _float(minimum=0))
    # where the `etl` API client commands connect, and the bearer token they send
    api_url: str = _var("ETL_API_URL", "http://127.0.0.1:8080", fallback=_bind_url)
    token: str | None = _var("ETL_TOKEN", None, _text)
    fusion: bool = _var("ETL_FUSION", "1", _flag, empty_is_unset=True)  # stage fusion
    # an executor's memory limit; a fused group keeps within a budget derived from it
    executor_memory_mib: int = _var("ETL_EXECUTOR_MEMORY_MIB", "512", _int(minimum=1))
    overlap: bool = _var("ETL_OVERLAP", "1", _flag, empty_is_unset=True)  # commits ahead
    # the console's base in webhook bodies' links
    public_url: str = _var(
        "ETL_PUBLIC_URL",
        "http://127.0.0.1:8080",
        lambda _n, raw: raw.rstrip("/"),
        fallback=_bind_url,
    )
    # a trace viewer's URL with {trace_id}: the console links each run's trace there
    trace_url: str | None = _var("ETL_TRACE_URL", None, lambda _n, raw: _trace_url(raw or None))
    webhook_timeout_s: float = _var("ETL_WEBHOOK_TIMEOUT_S", "5", _float(minimum=0.1))
    webhook_max_attempts: int = _var("ETL_WEBHOOK_MAX_ATTEMPTS", "20", _int(minimum=1))
    webhook_backoff_s: float = _var("ETL_WEBHOOK_BACKOFF_S", "1", _float(minimum=0.01))
    webhook_backoff_max_s: float = _var("ETL_WEBHOOK_BACKOFF_MAX_S", "3600", _float(minimum=0.01))
    # file-arrival schedules: how often the watcher looks, and how long a file must stay
    # unchanged (size and modification time) before it counts as complete
    watch_poll_s: float = _var("ETL_WATCH_POLL_S", "1", _float(minimum=0.05))
    watch_settle_s: float = _var("ETL_WATCH_SETTLE_S", "2", _float(minimum=0))
    tracing: bool = False  # OTLP export of spans (an OTEL_EXPORTER_OTLP_*ENDPOINT is set)
    otel_service_name: str | None = None  # OTEL_SERVICE_NAME; None: each process kind's

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        """Build the configuration from `env` (default: `os.environ`); no side effects. A
        heartbeat not shorter than the lease is refused: the lease would lapse between two."""
        env = os.environ if env is None else env
        read: dict[str, Any] = {}
        for f in fields(cls):
            if "env" in f.metadata:
                read[f.name] = _read(env, f.metadata, read)
        for name in ("data_dir", "export_dir", "reject_dir"):
            read[name] = read[name].absolute()
        if read["heartbeat_s"] >= read["lease_ttl_s"]:
            raise ConfigError(
                f"ETL_HEARTBEAT_S: must be shorter than ETL_LEASE_TTL_S "
                f"({read['heartbeat_s']:g} >= {read['lease_ttl_s']:g})"
            )
        return cls(
            **read, tracing=_tracing(env), otel_service_name=env.get("OTEL_SERVICE_NAME") or None
        )


def _read(env: Mapping[str, str], spec: Mapping[str, Any], read: dict[str, Any]) -> Any:
    raw = env.get(spec["env"])
    if raw is None or (raw == "" and spec["empty_is_unset"]):
        if spec["fallback"] is not None:
            return spec["fallback"](read)
        raw = spec["raw"]
    return None if raw is None else spec["read"](spec["env"], raw)


def _tracing(env: Mapping[str, str]) -> bool:
    """OTLP export is on when an endpoint is set (all signals' or the traces' own) and the
    SDK is not disabled (`OTEL_SDK_DISABLED=true`) nor the traces exporter `none`."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    exporter = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    return bool(endpoint and endpoint.strip()) and not disabled and exporter != "none"
