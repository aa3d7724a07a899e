"""Stage fusion on real processes: a chain and the exports off it run in one executor, one
pass; a follower that fails leaves the group while the others finish; its retry and a resume
recompute the upstream output nobody kept, and refuse to go on when it came out different."""

from __future__ import annotations

import json

import pytest

from drills import Stack

N = 1800  # 4 batches
PLAN = {
    "on_failure": "continue_independent",
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "p.csv", "columns": {"id": "int", "n": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
        {"name": "to_table", "type": "export", "depends_on": ["clean"],
         "retry": {"max_attempts": 1},
         "config": {"target": "table", "table": "fused_people", "key": "id"}},
        {"name": "to_file", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": "p.jsonl"}},
    ],
}  # fmt: skip


FAIL_TABLE = {"ETL_FAULT": "fail_attempts:step=to_table:times=1"}
NO_ROOM = {"ETL_EXECUTOR_MEMORY_MIB": "96"}  # a fused group's budget: 0 bytes
FAIL_CLEAN = {"ETL_FAULT": "fail_attempts:step=clean:times=1"}


def _csv(n: int, bump: int = 0) -> str:
    rows = (f'{i},"  Person   {i} ",{i * 10 + bump}\n' for i in range(1, n + 1))
    return "id,name,n\n" + "".join(rows)


# the `stack` fixture (tests/integration/conftest.py) reads this; env from a parameter
STACK_FILES = {"p.csv": lambda: _csv(N)}


def _steps(run: dict) -> dict[str, dict]:
    return {s["name"]: s for s in run["steps"]}


def _outcomes(step: dict) -> list[str]:
    return [a["outcome"] for a in step["attempts"]]


def _table_rows(stack: Stack, run_id: str) -> tuple:
    query = "SELECT count(*), count(DISTINCT id) FROM sandbox.fused_people WHERE run_id = %s"
    return stack.sql(query, run_id)[0]


@pytest.mark.parametrize("stack", [FAIL_TABLE], indirect=True)
def test_a_failed_follower_leaves_the_group_and_its_resume_recomputes_the_unkept_input(
    stack: Stack,
) -> None:
    stack.start()
    pid = stack.create("fused", PLAN)
    run = stack.wait_run(stack.trigger(pid)[1]["id"])
    steps = _steps(run)
    assert run["status"] == "failed"
    assert {n: s["status"] for n, s in steps.items()} == {
        "read": "succeeded", "clean": "succeeded", "to_table": "failed", "to_file": "succeeded",
    }  # fmt: skip
    # one pass in one executor: every follower's attempt ran inside the attempt of `read`
    executors = {s["attempts"][0]["executor"] for s in steps.values()}
    assert len(executors) == 1
    assert [a["fused_into"] for a in steps["clean"]["attempts"]] == ["read"]
    assert steps["read"]["attempts"][0]["fused_into"] is None
    assert _outcomes(steps["to_table"]) == ["failed"]
    assert len((stack.exports / run["id"] / "p.jsonl").read_text().splitlines()) == N
    # the outputs were handed over in memory: nothing stored, and the steps say so
    assert stack.sql("SELECT count(*) FROM step_batches WHERE run_id = %s", run["id"]) == [(0,)]
    kept = dict(stack.sql("SELECT name, output_kept FROM step_runs WHERE run_id = %s", run["id"]))
    assert (kept["read"], kept["clean"]) == (False, False)
    assert steps["clean"]["batches"] == 4

    code, _ = stack.req("POST", f"/runs/{run['id']}/resume")
    assert code == 202
    after = _steps(stack.wait_run(run["id"], until=("failed", "succeeded")))
    assert after["to_table"]["status"] == "succeeded", after["to_table"]["error"]
    assert _outcomes(after["to_table"]) == ["failed", "succeeded"]
    for name in ("read", "clean", "to_file"):  # recomputed, not run again
        assert after[name]["attempts"] == steps[name]["attempts"], name
        assert after[name]["output_digest"] == steps[name]["output_digest"], name
    assert after["to_table"]["input_digest"] == steps["clean"]["output_digest"]
    assert after["to_table"]["output_digest"] == steps["clean"]["output_digest"]
    assert _table_rows(stack, run["id"]) == (N, N)
    normalized = (
        "SELECT count(*) FROM sandbox.fused_people WHERE run_id = %s AND name = 'Person ' || id"
    )
    assert stack.sql(normalized, run["id"]) == [(N,)]


@pytest.mark.parametrize("stack", [FAIL_TABLE], indirect=True)
def test_a_resume_whose_recomputed_input_differs_fails_loudly(stack: Stack) -> None:
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("fused", PLAN))[1]["id"])
    assert run["status"] == "failed"
    (stack.data / "p.csv").write_text(_csv(N, bump=1))  # the input changed since the run
    code, _ = stack.req("POST", f"/runs/{run['id']}/resume")
    assert code == 202
    after = stack.wait_run(run["id"], until=("failed", "succeeded"))
    to_table = _steps(after)["to_table"]
    assert after["status"] == "failed"
    assert _outcomes(to_table) == ["failed", "input_error"]
    assert "step 'read' was recomputed" in to_table["error"], to_table["error"]
    assert "differs from the recorded one" in to_table["error"]
    assert _table_rows(stack, run["id"]) == (0, 0)  # nothing published


@pytest.mark.parametrize("stack", [FAIL_CLEAN], indirect=True)
def test_a_follower_retried_after_its_upstream_took_its_dependents_with_it(stack: Stack) -> None:
    stack.start()
    plan = json.loads(json.dumps(PLAN))
    plan["steps"][1]["retry"] = {"max_attempts": 2}
    run = stack.wait_run(stack.trigger(stack.create("fused", plan))[1]["id"])
    steps = _steps(run)
    assert run["status"] == "succeeded", run
    assert _outcomes(steps["read"]) == ["succeeded"]
    assert _outcomes(steps["clean"]) == ["failed", "succeeded"]
    # released with `clean`, then run in its second attempt's group
    for name in ("to_table", "to_file"):
        assert _outcomes(steps[name]) == ["released", "succeeded"], name
        assert [a["fused_into"] for a in steps[name]["attempts"]] == ["read", "clean"]
    started = steps["clean"]["attempts"][1]["started_at"]
    assert started >= steps["read"]["finished_at"]  # the retry waited for its upstream
    assert _table_rows(stack, run["id"]) == (N, N)
    assert len((stack.exports / run["id"] / "p.jsonl").read_text().splitlines()) == N
    assert steps["clean"]["input_digest"] == steps["read"]["output_digest"]


TREE_CSV = "id,name,kind,n\n" + "".join(
    f'{i}," Person  {i} ",{"ab"[i % 3 == 0]},{i * 7 % 1000}\n' for i in range(1, 2301)
)  # 5 batches; a third of the records have kind b
TREE = {
    "on_failure": "stop_dependents",
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "t.csv", "columns": {"id": "int", "n": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
        {"name": "by_kind", "type": "transform", "depends_on": ["clean"],
         "config": {"op": "aggregate", "column": "n", "group_by": ["kind"]}},
        {"name": "by_kind_out", "type": "export", "depends_on": ["by_kind"],
         "config": {"target": "file", "path": "by_kind.csv", "format": "csv"}},
        {"name": "only_a", "type": "transform", "depends_on": ["clean"],
         "config": {"op": "filter_eq", "column": "kind", "value": "a"}},
        {"name": "a_out", "type": "export", "depends_on": ["only_a"],
         "config": {"target": "table", "table": "tree_a", "key": "id"}},
        {"name": "all_out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "all.jsonl"}},
        {"name": "read2", "type": "ingest",
         "config": {"source": "file", "path": "t.csv", "columns": {"id": "int", "n": "int"}}},
        {"name": "total", "type": "transform", "depends_on": ["read2"],
         "config": {"op": "aggregate", "column": "n", "group_by": []}},
        {"name": "total_out", "type": "export", "depends_on": ["total"],
         "config": {"target": "file", "path": "total.jsonl"}},
    ],
}  # fmt: skip
FILES = ("by_kind.csv", "all.jsonl", "total.jsonl")


def _tree_run(stack: Stack, name: str) -> tuple[dict, dict[str, str], set[str], tuple]:
    """The tree's run on `stack`: the run, its export files, the steps that stored output,
    and (rows, distinct ids) of its table export."""
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create(name, TREE))[1]["id"])
    files = {f: (stack.exports / run["id"] / f).read_text() for f in FILES}
    stack.stop()
    stored = "SELECT DISTINCT step_name FROM step_batches WHERE run_id = %s"
    rows = "SELECT count(*), count(DISTINCT id) FROM sandbox.tree_a WHERE run_id = %s"
    return run, files, {r[0] for r in stack.sql(stored, run["id"])}, stack.sql(rows, run["id"])[0]


def test_a_tree_fuses_under_stop_dependents_with_the_outputs_and_digests_of_an_unfused_run(
    stack_factory,
) -> None:
    files = {"t.csv": TREE_CSV}
    fused, fused_files, stored, fused_rows = _tree_run(stack_factory(files=files), "tree")
    unfused_stack = stack_factory(env={"ETL_FUSION": "0"}, files=files)
    plain, plain_files, _, plain_rows = _tree_run(unfused_stack, "p")
    assert fused["status"] == plain["status"] == "succeeded"
    steps, unfused = _steps(fused), _steps(plain)
    # two passes over the file, one per ingest: each tree ran in its ingest's attempt, and
    # what reads an aggregate started after it, as the next group
    into = {n: s["attempts"][0]["fused_into"] for n, s in steps.items()}
    assert into == {
        "read": None, "clean": "read", "by_kind": "read", "only_a": "read", "a_out": "read",
        "all_out": "read", "by_kind_out": None, "read2": None, "total": "read2",
        "total_out": None,
    }  # fmt: skip
    assert all(a["fused_into"] is None for s in unfused.values() for a in s["attempts"])
    # only the aggregates' outputs were stored (they are read outside their group)
    assert stored == {"by_kind", "total"}
    for name, s in steps.items():
        assert _outcomes(s) == ["succeeded"], name
        keys = ("records_in", "records_out", "rejected", "input_digest", "output_digest")
        assert [s[k] for k in keys] == [unfused[name][k] for k in keys], name
    assert fused_files == plain_files
    assert steps["only_a"]["records_out"] == 1534  # kind a: the ids not divisible by 3
    assert steps["by_kind"]["records_out"] == 2
    assert fused_rows == plain_rows == (1534, 1534)


@pytest.mark.parametrize("stack", [NO_ROOM], indirect=True)
def test_followers_over_the_memory_budget_leave_the_group_and_run_after_it(stack: Stack) -> None:
    """With no room for a second output in memory, the first batch cuts every follower out
    of the group before it reaches them: each runs after its upstream, on its own, reading
    the output its upstream stored from that batch on (nothing recomputed)."""
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("no-room", PLAN))[1]["id"])
    steps = _steps(run)
    assert run["status"] == "succeeded", run
    assert _outcomes(steps["read"]) == ["succeeded"]
    assert [a["fused_into"] for a in steps["clean"]["attempts"]] == ["read", None]
    assert _outcomes(steps["clean"]) == ["released", "succeeded"]
    for name in ("to_table", "to_file"):  # adopted by read's group, then by clean's
        assert _outcomes(steps[name]) == ["released", "released", "succeeded"], name
        assert [a["fused_into"] for a in steps[name]["attempts"]] == ["read", "clean", None]
    kept = dict(stack.sql("SELECT name, output_kept FROM step_runs WHERE run_id = %s", run["id"]))
    assert (kept["read"], kept["clean"]) == (True, True)
    assert steps["clean"]["input_digest"] == steps["read"]["output_digest"]
    assert _table_rows(stack, run["id"]) == (N, N)
    assert len((stack.exports / run["id"] / "p.jsonl").read_text().splitlines()) == N
