"""Schema drift on real processes: a file whose columns changed since the pipeline's last
succeeded run, under each `on_schema_change`; the change is shown on the step either way."""

from __future__ import annotations

import pytest

from drills import Stack

BEFORE = "id,name,fax\n1,Ann,555\n2,Bob,556\n"
AFTER = "id,name,email\n3,Cy,c@x\n4,Di,d@x\n"


def _plan(mode: str | None) -> dict:
    config = {"source": "file", "path": "people.csv", "columns": {"id": "int"}}
    if mode is not None:
        config["on_schema_change"] = mode
    return {
        "steps": [
            {"name": "read", "type": "ingest", "config": config},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": "people_drift", "key": "id"}},
        ]
    }  # fmt: skip


def _read(run: dict) -> dict:
    return next(s for s in run["steps"] if s["name"] == "read")


@pytest.mark.parametrize("mode", [None, "fail", "evolve", "ignore"])
def test_each_on_schema_change(stack: Stack, mode: str | None) -> None:
    (stack.data / "people.csv").write_text(BEFORE)
    stack.start()
    pid = stack.create("people", _plan(mode))
    first = stack.wait_run(stack.trigger(pid, "first")[1]["id"])
    assert first["status"] == "succeeded" and _read(first)["schema_change"] is None
    (stack.data / "people.csv").write_text(AFTER)
    second = stack.wait_run(stack.trigger(pid, "second")[1]["id"])
    change = _read(second)["schema_change"]
    assert change == {"added": ["email"], "removed": ["fax"], "since_run": first["id"]}
    if mode in (None, "fail"):
        assert second["status"] == "failed"
        read = _read(second)
        assert len(read["attempts"]) == 1 and read["attempts"][0]["outcome"] == "input_error"
        assert "added 'email'; removed 'fax'" in read["error"]
        assert stack.sql("SELECT count(*) FROM sandbox.people_drift")[0][0] == 2
        return
    assert second["status"] == "succeeded"
    rows = stack.sql(
        "SELECT id, name, fax, email FROM sandbox.people_drift ORDER BY id"
    )  # the table export added the new column; the removed one is null from now on
    assert [tuple(r) for r in rows] == [
        (1, "Ann", 555, None), (2, "Bob", 556, None), (3, "Cy", None, "c@x"),
        (4, "Di", None, "d@x"),
    ]  # fmt: skip
