"""Where each file of a glob ingest starts in a step's output, kept by its checks in the
checkpoint: an attempt that resumes from it still names the file of a repeated key's first
record, even one read by an earlier attempt."""

from __future__ import annotations

import json

from actors.checks import StepChecks
from dag import Step

STEP = Step("read", "ingest", checks=({"check": "not_null", "columns": ["id"]},))


def test_a_resumed_attempt_knows_the_files_an_earlier_one_read() -> None:
    first = StepChecks(STEP, "run", {})
    first.observe([{"id": 1}, {"id": 2}], {"id": "int"}, 1, [2, 3], "daily/a.csv")
    first.observe([{"id": None}], {"id": "int"}, 3, [2], "daily/b.csv")
    checkpoint: dict = {}
    first.save(checkpoint)
    checkpoint = json.loads(json.dumps(checkpoint))  # as the state database keeps it
    assert checkpoint["check_files"] == [[1, "daily/a.csv"], [3, "daily/b.csv"]]
    (example,) = checkpoint["checks"][0][1]
    assert (example["file"], example["line"], example["record"]) == ("daily/b.csv", 2, 3)

    resumed = StepChecks(STEP, "run", checkpoint)
    resumed.observe([{"id": 4}], {"id": "int"}, 4, [3], "daily/b.csv")  # the same file on
    resumed.observe([{"id": 5}], {"id": "int"}, 5, [2], "daily/c.csv")
    shown = [
        resumed._placed({"key": [k], "records": 2, "first_record": k, "first_line": 2})
        for k in (2, 4, 5)
    ]
    assert [(e["first_record"], e["first_file"]) for e in shown] == [
        (2, "daily/a.csv"), (4, "daily/b.csv"), (5, "daily/c.csv"),
    ]  # fmt: skip
    one_file = StepChecks(STEP, "run", {})
    one_file.observe([{"id": 1}], {"id": "int"}, 1, [2])
    saved: dict = {}
    one_file.save(saved)
    assert "check_files" not in saved  # an ingest of one file names none
