"""Migration 0029 on a database whose step was running a `unique` check when it applied:
the keys that step committed (one row each in `step_check_keys`, migration 0024) move to
`step_check_key_batches`, and the attempt that resumes from its checkpoint finds a key of
its next batch repeated across the migration, each example's key shown as written."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import psycopg2
import pytest

from actors.checks import open_checks
from dag import CheckFailed, Step
from ddl.migrate import MIGRATIONS_DIR, apply_migrations
from tests.integration.actors.seeds import seed_running_run
from tests.integration.ddl.test_migrations import _drop, _fresh_url

LONG = "x" * 300  # a key longer than the 200 characters 0024 kept of its text


def _key_row(run_id: str, ordinal: int, value) -> tuple:
    """A row as 0024's writer put it: the digest of the key's JSON, its text cut at 200."""
    key = json.dumps([value], ensure_ascii=False)
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return run_id, "read", 0, ordinal, int.from_bytes(digest, "big", signed=True), key[:200]


def test_keys_moved_by_0029_still_find_a_duplicate_after_the_resume(tmp_path: Path) -> None:
    url = _fresh_url()
    try:
        for src in sorted(MIGRATIONS_DIR.glob("*.sql")):
            if src.name < "0029":
                shutil.copy(src, tmp_path / src.name)
        apply_migrations(url, tmp_path)
        conn = psycopg2.connect(url)
        _, run_id = seed_running_run(conn)
        with conn.cursor() as cur:  # three records committed, their keys as 0024 kept them
            cur.executemany(
                "INSERT INTO step_check_keys (run_id, step_name, check_no, ordinal, key_hash,"
                " key) VALUES (%s, %s, %s, %s, %s, %s)",
                [_key_row(run_id, i, v) for i, v in enumerate((17, "a", LONG), start=1)],
            )
        conn.commit()
        assert "0029_check_metrics_and_lines.sql" in apply_migrations(url)

        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM step_check_key_batches WHERE run_id = %s", (run_id,))
            assert cur.fetchone() == (3,)
        step = Step("read", "ingest", checks=({"check": "unique", "columns": ["id"]},))
        checkpoint = {"checks": [[0, []]]}  # the step's checkpoint after its third record
        checks = open_checks(conn, step, run_id, checkpoint)
        checks.observe([{"id": 5}, {"id": LONG}, {"id": 17}], {"id": "text"}, 4, [5, 6, 7])
        with conn.cursor() as cur:  # the batch's commit
            for staged in checks.take_staged():
                cur.execute(staged.query, staged.params)
        conn.commit()
        with pytest.raises(CheckFailed, match="2 record"):
            checks.verdict(conn, 6, 6, 0)
        with conn.cursor() as cur:
            cur.execute("SELECT checks FROM step_runs WHERE run_id = %s", (run_id,))
            ((result,),) = cur.fetchall()
        assert (result[0]["outcome"], result[0]["failing"]) == ("failed", 2)
        assert result[0]["examples"] == [
            {"key": [17], "records": 2, "first_record": 1},
            {"key": json.dumps([LONG])[:200] + "…", "records": 2, "first_record": 3},
        ]
        conn.close()
    finally:
        _drop(url)
