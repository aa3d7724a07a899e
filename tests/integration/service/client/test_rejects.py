"""`etl runs show --rejects` and `GET /runs/{id}/steps/{step}/rejects` on a real topology:
the first rejected rows of each step, with line, column and reason."""

from __future__ import annotations

from drills import ADMIN_TOKEN, Stack

STACK_FILES = {
    "mixed.csv": "id,name\n1,ada\nnot a number,bob\n3,cy\n4.5,dee\n5,eve\nsix,fay\n",
}
PLAN = {"on_row_error": "reject", "steps": [
    {"name": "read", "type": "ingest",
     "config": {"source": "file", "path": "mixed.csv", "columns": {"id": "int"}}},
    {"name": "save", "type": "export", "depends_on": ["read"],
     "config": {"target": "file", "path": "mixed.jsonl"}}]}  # fmt: skip


def test_runs_show_rejects_prints_the_first_rejected_rows_of_each_step(stack: Stack) -> None:
    stack.start()
    pid = stack.create("mixed", PLAN)
    _, run = stack.trigger(pid)
    assert stack.wait_run(run["id"])["status"] == "succeeded"
    # the API: bounded by `limit`, from the published reject file
    status, body = stack.req("GET", f"/api/v1/runs/{run['id']}/steps/read/rejects?limit=2")
    assert status == 200, body
    assert body["rejected"] == 3 and body["published"] and body["step"] == "read"
    assert [(r["line"], r["column"]) for r in body["items"]] == [(3, "id"), (5, "id")]
    assert body["items"][0]["raw"] == {"id": "not a number", "name": "bob"}
    assert body["items"][0]["reason"]
    status, body = stack.req("GET", f"/api/v1/runs/{run['id']}/steps/nope/rejects")
    assert status == 404 and "nope" in body["error"]["message"]
    status, body = stack.req("GET", f"/api/v1/runs/{run['id']}/steps/read/rejects?limit=0")
    assert status == 400 and body["error"]["details"][0]["field"] == "limit"
    # the CLI: plain lines (no terminal here), every rejecting step
    stack.env["ETL_TOKEN"] = ADMIN_TOKEN  # the client's own setting (the topology has none)
    out = stack.etl("runs", "show", run["id"], "--rejects", "2")
    assert "step read: 3 rejected, first 2 (from " in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("3 ", "5 ", "7 "))]
    assert [r[:2] for r in rows] == [["3", "id"], ["5", "id"]]
    assert "not a number" in out and "save" not in out.split("step read:")[1]
    everything = stack.etl("runs", "show", run["id"], "--rejects")  # default: the first 20
    assert "first 3 " in everything and "six" in everything
    shown = stack.etl("runs", "show", run["id"])  # the step lines count in, out, rejected
    (read,) = [ln.split() for ln in shown.splitlines() if ln.startswith("read ")]
    assert read[2:5] == ["records", "6/6", "out"] and read[5:8] == ["3", "rejected", "3"]
    assert "rejected" not in shown.split("\nsave")[1]  # only a step that rejected says so
    assert "not a number" not in shown  # the rows themselves only when asked
