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
    assert "rejected" not in stack.etl("runs", "show", run["id"])  # only when asked
