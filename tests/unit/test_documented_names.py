"""The reference pages in docs/ name what the code has, and nothing it lacks: every `ETL_*`
variable `service/config.py` reads is in docs/configuration.md (and every one documented
there is read), every `etl` command is in docs/cli.md, every metric family of
`service/domain/metrics.py` is in docs/metrics.md."""

from __future__ import annotations

import re
from pathlib import Path

from service.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def _text(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def test_every_variable_read_is_documented_and_every_documented_one_is_read() -> None:
    read = set(re.findall(r"""["'](ETL_[A-Z0-9_]+)["']""", _text("service/config.py")))
    documented = set(re.findall(r"`(ETL_[A-Z0-9_]+)`", _text("docs/configuration.md")))
    assert read - documented == set(), "read by service/config.py, not in docs/configuration.md"
    assert documented - read == set(), "in docs/configuration.md, not read by service/config.py"


def test_every_command_is_documented() -> None:
    text = _text("docs/cli.md")
    missing = [name for name in COMMANDS if f"`etl {name}" not in text]
    assert missing == []


def test_every_metric_family_is_documented() -> None:
    families = set(re.findall(r"\b(etl_[a-z_]+)\b", _text("service/domain/metrics.py")))
    families = {f for f in families if not f.endswith(("_bucket", "_count", "_sum"))}
    assert len(families) > 10
    text = _text("docs/metrics.md")
    assert sorted(f for f in families if f not in text) == []
