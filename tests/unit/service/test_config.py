"""`Config.from_env`: defaults, and bad numbers named by their variable (no database)."""

from __future__ import annotations

import pytest

from service.cli import main
from service.config import Config, ConfigError


def test_defaults() -> None:
    cfg = Config.from_env({})
    assert (cfg.lease_ttl_s, cfg.heartbeat_s, cfg.sweep_s) == (30.0, 10.0, 2.0)
    assert (cfg.api_workers, cfg.retention_days) == (2, 7.0)
    assert Config.from_env({"ETL_RETENTION_DAYS": "0.5"}).retention_days == 0.5


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ETL_SWEEP_S": "2s"}, "ETL_SWEEP_S: expected a number, got '2s'"),
        ({"ETL_API_WORKERS": "2.5"}, "ETL_API_WORKERS: expected an integer, got '2.5'"),
        ({"ETL_RETENTION_DAYS": "-1"}, "ETL_RETENTION_DAYS: must be >= 0, got '-1'"),
        ({"ETL_RETENTION_DAYS": "nan"}, "ETL_RETENTION_DAYS: expected a finite number, got 'nan'"),
        ({"ETL_LEASE_TTL_S": "inf"}, "ETL_LEASE_TTL_S: expected a finite number, got 'inf'"),
    ],
)
def test_a_bad_number_names_its_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Config.from_env(env)
    assert str(exc.value) == message


def test_the_cli_reports_a_configuration_error_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ETL_RETENTION_DAYS", "soon")
    assert main(["purge"]) == 2
    err = capsys.readouterr().err
    assert err == "etl: configuration error: ETL_RETENTION_DAYS: expected a number, got 'soon'\n"


@pytest.mark.parametrize(
    ("raw", "fusion"),
    [(None, True), ("", True), ("1", True), ("on", True), ("0", False), ("False", False)],
)
def test_stage_fusion_is_on_unless_switched_off(raw: str | None, fusion: bool) -> None:
    env = {} if raw is None else {"ETL_FUSION": raw}
    assert Config.from_env(env).fusion is fusion


@pytest.mark.parametrize(("raw", "overlap"), [(None, True), ("1", True), ("0", False)])
def test_batches_commit_ahead_unless_switched_off(raw: str | None, overlap: bool) -> None:
    env = {} if raw is None else {"ETL_OVERLAP": raw}
    assert Config.from_env(env).overlap is overlap


def test_the_executor_memory_limit_is_512_mib_unless_set() -> None:
    assert Config.from_env({}).executor_memory_mib == 512
    assert Config.from_env({"ETL_EXECUTOR_MEMORY_MIB": "1024"}).executor_memory_mib == 1024
    with pytest.raises(ConfigError, match="ETL_EXECUTOR_MEMORY_MIB: expected an integer"):
        Config.from_env({"ETL_EXECUTOR_MEMORY_MIB": "lots"})


def test_a_bad_flag_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="ETL_FUSION: expected 1/true/yes/on or 0/false"):
        Config.from_env({"ETL_FUSION": "sometimes"})
    with pytest.raises(ConfigError, match="ETL_OVERLAP: expected 1/true/yes/on or 0/false"):
        Config.from_env({"ETL_OVERLAP": "later"})


@pytest.mark.parametrize(("lease", "heartbeat"), [("30", "30"), ("3", "10"), ("1", "1.5")])
def test_a_heartbeat_not_shorter_than_the_lease_is_refused(lease: str, heartbeat: str) -> None:
    with pytest.raises(ConfigError, match="ETL_HEARTBEAT_S: must be shorter than ETL_LEASE_TTL_S"):
        Config.from_env({"ETL_LEASE_TTL_S": lease, "ETL_HEARTBEAT_S": heartbeat})


def test_every_variable_is_declared_once_with_its_field() -> None:
    env = {
        "ETL_SANDBOX_URL": "",
        "ETL_API_BIND": "0.0.0.0:9000",
        "ETL_PUBLIC_URL": "https://etl.example/",
        "ETL_TOKEN": "",
    }
    cfg = Config.from_env(env)
    assert cfg.sandbox_url == cfg.database_url  # empty: the fallback
    assert cfg.api_url == "http://0.0.0.0:9000"
    assert cfg.public_url == "https://etl.example"
    assert cfg.token is None
    assert cfg.data_dir.is_absolute()


def test_the_trace_url_holds_trace_id_once_and_is_http() -> None:
    template = "http://127.0.0.1:16686/trace/{trace_id}"
    assert Config.from_env({"ETL_TRACE_URL": template}).trace_url == template
    assert Config.from_env({}).trace_url is None
    for bad in (
        "127.0.0.1:16686/trace/{trace_id}",
        "http://x/trace",
        "http://x/{trace_id}/{trace_id}",
    ):
        with pytest.raises(ConfigError, match="ETL_TRACE_URL: expected an http"):
            Config.from_env({"ETL_TRACE_URL": bad})
