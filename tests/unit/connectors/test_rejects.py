"""Reading a step's published reject file back (the console's rejected rows)."""

from __future__ import annotations

import uuid
from pathlib import Path

from connectors import encode_rejects, read_rejects, reject_file
from dag.records import RowError


def test_reads_the_first_rows_of_the_published_file_only(tmp_path: Path) -> None:
    run_id = uuid.uuid4()
    assert not read_rejects(tmp_path, run_id, "read", limit=5).exists
    f = reject_file(tmp_path, run_id, "read")
    errors = [RowError(f"bad {i}", line=i + 1, record=i, column="id", raw={"id": f"<x{i}>"})
              for i in range(1, 8)]  # fmt: skip
    f.write_chunk(0, encode_rejects(errors))
    assert not read_rejects(tmp_path, run_id, "read", limit=5).exists  # staged: not yet
    f.publish(1)
    preview = read_rejects(tmp_path, run_id, "read", limit=5)
    assert preview.exists and preview.path == tmp_path / str(run_id) / "read.jsonl"
    assert [r["reason"] for r in preview.rows] == [f"bad {i}" for i in range(1, 6)]
    assert preview.rows[0] == {"line": 2, "record": 1, "column": "id", "reason": "bad 1",
                               "raw": {"id": "<x1>"}}  # fmt: skip


def test_an_oversized_or_broken_line_is_shown_raw_and_reading_goes_on(tmp_path: Path) -> None:
    run_id = uuid.uuid4()
    f = reject_file(tmp_path, run_id, "read")
    huge = '{"reason": "' + "x" * 100_000 + '"}\n'
    good = encode_rejects([RowError("after", line=9)])
    f.write_chunk(0, huge.encode() + b"not json\n" + good)
    f.publish(1)
    rows = read_rejects(tmp_path, run_id, "read", limit=10).rows
    assert [r["reason"] for r in rows] == ["unreadable", "unreadable", "after"]
    assert rows[1]["raw"] == "not json"
