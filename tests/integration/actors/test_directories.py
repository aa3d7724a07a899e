"""Executors must see one export and one reject directory: an executor whose directories are
not the live executors' refuses to start (its own temp root here stands for another host's
local disk), and says which directory differs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

from actors import DirectoryMismatch, Presence
from connectors import directory_mark
from ddl import connector
from drills import Stack


def _presence(db_url: str, name: str, root: Path, **kw) -> Presence:
    return Presence(
        connector(db_url, f"etl-test-{name}"),
        name=name,
        owner=f"{name}:boot",
        interval_s=60,
        stale_after_s=kw.pop("stale_after_s", 30),
        export_dir=kw.pop("export_dir", root / "exports"),
        reject_dir=kw.pop("reject_dir", root / "rejects"),
    )


def _live(conn) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT name FROM executors WHERE stopped_at IS NULL ORDER BY name")
        return [r[0] for r in cur.fetchall()]


def test_a_mark_is_written_once_and_read_by_everyone(tmp_path: Path) -> None:
    first = directory_mark(tmp_path / "exports")
    assert directory_mark(tmp_path / "exports") == first
    assert directory_mark(tmp_path / "other") != first


def test_executors_sharing_the_directories_all_start(db_url: str, conn, tmp_path: Path) -> None:
    with _presence(db_url, "executor-a", tmp_path), _presence(db_url, "executor-b", tmp_path):
        assert _live(conn) == ["executor-a", "executor-b"]


@pytest.mark.parametrize("differs", ["export_dir", "reject_dir"])
def test_an_executor_seeing_another_directory_refuses_to_start(
    db_url: str, conn, tmp_path: Path, differs: str
) -> None:
    with _presence(db_url, "executor-a", tmp_path):
        other = _presence(db_url, "executor-b", tmp_path, **{differs: tmp_path / "elsewhere"})
        with pytest.raises(DirectoryMismatch) as refused:
            other.__enter__()
        variable = "ETL_EXPORT_DIR" if differs == "export_dir" else "ETL_REJECT_DIR"
        assert variable in str(refused.value) and "executor-a" in str(refused.value)
        assert str(tmp_path / "elsewhere") in str(refused.value)
        assert _live(conn) == ["executor-a"]  # the refused one is marked stopped


def test_only_live_executors_with_marks_count(db_url: str, conn, tmp_path: Path) -> None:
    """A stopped executor, one whose beat is stale, and one of an earlier version (no marks)
    do not keep an executor with other directories from starting."""
    with _presence(db_url, "executor-a", tmp_path):
        pass  # stopped cleanly
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO executors (name, owner, pid, stale_after_s, heartbeat_at) VALUES"
            " ('old-version', 'old-version:1', 1, 30, now()),"
            " ('stale', 'stale:1', 1, 30, now() - interval '1 minute')"
        )
        cur.execute("UPDATE executors SET export_mark = 'x', reject_mark = 'y'"
                    " WHERE name = 'stale'")  # fmt: skip
    conn.commit()
    with _presence(db_url, "executor-b", tmp_path / "elsewhere"):
        assert "executor-b" in _live(conn)


def test_the_executor_process_exits_2_naming_the_directory(db_url: str, tmp_path: Path) -> None:
    stack = Stack(db_url, tmp_path)
    with _presence(db_url, "executor-a", tmp_path, export_dir=stack.exports,
                   reject_dir=stack.rejects):  # fmt: skip
        other = tmp_path / "other-host-exports"
        done = subprocess.run(
            [sys.executable, "-m", "service", "executor", "--name", "executor-b"],
            env={**stack.env, "ETL_EXPORT_DIR": str(other)},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "refuses to start" in out and f"ETL_EXPORT_DIR {other}" in out, out
    with psycopg2.connect(db_url) as c, c.cursor() as cur:
        cur.execute("SELECT stopped_at IS NOT NULL FROM executors WHERE name = 'executor-b'")
        assert cur.fetchone() == (True,)
