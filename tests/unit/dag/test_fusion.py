"""Which steps fuse with a starting step, and which a resumed step recomputes (dag.fusion)."""

from __future__ import annotations

from typing import Any

from dag import (
    FUSION_BUDGET,
    BatchBytes,
    fit_budget,
    fused_peak,
    fusion_group,
    parse_plan,
    replay_chain,
)
from dag.plan import Plan

PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"
NOT_RUN = "not_run"


def _plan(steps: list[tuple[str, str, list[str]]], on_failure: str = "stop_dependents") -> Plan:
    """(name, kind, deps): kind is ingest, trim, aggregate, file or table."""
    out: list[dict[str, Any]] = []
    for name, kind, deps in steps:
        if kind == "ingest":
            step = {"type": "ingest", "config": {"source": "file", "path": "x.csv"}}
        elif kind == "trim":
            step = {"type": "transform", "config": {"op": "trim", "columns": ["a"]}}
        elif kind == "aggregate":
            step = {"type": "transform", "config": {"op": "aggregate", "column": "n"}}
        else:
            step = {"type": "export", "config": {"target": "file", "path": f"{name}.jsonl"}}
        out.append({"name": name, **step, "depends_on": deps})
    return parse_plan({"steps": out, "on_failure": on_failure})


SHAPE_B = [
    ("ingest", "ingest", []),
    ("normalize", "trim", ["ingest"]),
    ("to_table", "file", ["normalize"]),
    ("to_file", "file", ["normalize"]),
]


def _fresh(plan: Plan, head: str) -> dict[str, str]:
    return {s.name: RUNNING if s.name == head else PENDING for s in plan.steps}


def test_a_chain_and_the_exports_off_it_fuse_with_the_head_in_order() -> None:
    plan = _plan(SHAPE_B)
    got = fusion_group(plan, "ingest", _fresh(plan, "ingest"), {"normalize", "to_table", "to_file"})
    assert got == ("normalize", "to_table", "to_file")


def test_a_step_whose_checkpoint_does_not_fit_is_left_out_with_what_hangs_off_it() -> None:
    plan = _plan(SHAPE_B, on_failure="continue_independent")
    got = fusion_group(plan, "ingest", _fresh(plan, "ingest"), {"to_table", "to_file"})
    assert got == ()


def test_branches_fuse_as_a_tree_and_an_aggregate_is_a_sink_of_the_group() -> None:
    plan = _plan(
        [
            ("read", "ingest", []),
            ("a", "trim", ["read"]),
            ("b", "trim", ["read"]),
            ("out", "file", ["read"]),
            ("sum", "aggregate", ["a"]),
            ("after", "trim", ["sum"]),
            ("b_out", "file", ["b"]),
        ],
        on_failure="continue_independent",
    )
    everything = {s.name for s in plan.steps}
    # depth first: every member before what hangs off it, a branch before the next;
    # nothing behind the aggregate
    got = fusion_group(plan, "read", _fresh(plan, "read"), everything)
    assert got == ("a", "sum", "b", "b_out", "out")
    assert fusion_group(plan, "a", _fresh(plan, "a"), everything) == ("sum",)
    # the aggregate's output exists only at its end: what reads it starts as the next group
    assert fusion_group(plan, "sum", _fresh(plan, "sum"), everything) == ()


def test_a_tree_leaves_out_the_subtree_of_a_step_that_is_not_pending() -> None:
    plan = _plan(
        [
            ("read", "ingest", []),
            ("a", "trim", ["read"]),
            ("a_out", "file", ["a"]),
            ("b", "trim", ["read"]),
            ("b_out", "file", ["b"]),
        ],
        on_failure="continue_independent",
    )
    states = {**_fresh(plan, "read"), "b": SUCCEEDED}
    everything = {s.name for s in plan.steps}
    assert fusion_group(plan, "read", states, everything) == ("a", "a_out")


def test_a_step_with_two_dependencies_never_follows() -> None:
    plan = _plan(
        [("x", "ingest", []), ("y", "ingest", []), ("j", "trim", ["x", "y"])],
        on_failure="continue_independent",
    )
    assert fusion_group(plan, "x", _fresh(plan, "x"), {"j"}) == ()


BRANCHES = [
    ("read", "ingest", []),
    ("bad", "trim", ["read"]),
    ("good", "trim", ["read"]),
    ("good_out", "file", ["good"]),
]


def test_stop_dependents_fuses_a_tree_beside_open_steps_but_nothing_after_a_failure() -> None:
    plan = _plan(BRANCHES)
    states = {"read": SUCCEEDED, "bad": RUNNING, "good": RUNNING, "good_out": PENDING}
    # `bad` is open elsewhere: the group is started before any failure, so it forms
    assert fusion_group(plan, "good", states, {"good_out"}) == ("good_out",)
    states["bad"] = FAILED
    assert fusion_group(plan, "good", states, {"good_out"}) == ()  # nothing new after a failure
    independent = _plan(BRANCHES, on_failure="continue_independent")
    assert fusion_group(independent, "good", states, {"good_out"}) == ("good_out",)


def test_two_independent_ingests_each_fuse_their_own_tree_under_stop_dependents() -> None:
    plan = _plan(
        [
            ("x", "ingest", []),
            ("x_out", "file", ["x"]),
            ("y", "ingest", []),
            ("y_sum", "aggregate", ["y"]),
            ("y_out", "file", ["y"]),
        ]
    )
    states = {"x": RUNNING, "y": RUNNING, "x_out": PENDING, "y_sum": PENDING, "y_out": PENDING}
    aligned = {"x_out", "y_sum", "y_out"}
    assert fusion_group(plan, "x", states, aligned) == ("x_out",)
    assert fusion_group(plan, "y", states, aligned) == ("y_sum", "y_out")


def test_only_pending_steps_are_adopted() -> None:
    plan = _plan(SHAPE_B, on_failure="continue_independent")
    states = {**_fresh(plan, "ingest"), "to_file": NOT_RUN}
    aligned = {"normalize", "to_table", "to_file"}
    assert fusion_group(plan, "ingest", states, aligned) == ("normalize", "to_table")


def test_replay_chain_walks_up_through_unkept_single_upstreams() -> None:
    plan = _plan(SHAPE_B)
    assert replay_chain(plan, "to_file", {"ingest", "normalize"}) == ("ingest", "normalize")
    assert replay_chain(plan, "to_file", {"normalize"}) == ("normalize",)
    assert replay_chain(plan, "to_file", set()) == ()
    assert replay_chain(plan, "normalize", {"normalize"}) == ()


# A fused group's memory budget (dag.fit_budget): the cases of issue 31.
WIDE = BatchBytes.measured(500, 1000, 5 * 2**20)  # 1,000 columns, 10 KiB a record
LARGE = BatchBytes.measured(49, 1, 49 * 2**20)  # 49 records of 1 MiB
SMALL = BatchBytes.measured(500, 7, 60_000)


def _chain(length: int) -> Plan:
    steps = [("s0", "ingest", [])]
    steps += [(f"s{i}", "trim", [f"s{i - 1}"]) for i in range(1, length - 1)]
    return _plan([*steps, ("out", "file", [f"s{length - 2}"])])


def _fan_out(kind: str, branches: int = 28) -> Plan:
    return _plan([("read", "ingest", []), *((f"b{i}", kind, ["read"]) for i in range(branches))])


def _names(plan: Plan) -> list[str]:
    return [s.name for s in plan.steps]


def test_the_budget_is_half_of_what_the_512_mib_limit_leaves_besides_the_executor() -> None:
    assert FUSION_BUDGET == (512 - 96) * 2**20 // 2


def test_a_chain_holds_two_outputs_at_once_whatever_its_length() -> None:
    short, long = _chain(4), _chain(28)
    assert fused_peak(short, _names(short), (), WIDE) == fused_peak(long, _names(long), (), WIDE)
    assert fused_peak(long, _names(long), (), WIDE) == WIDE.records + 2 * (WIDE.rows + WIDE.records)
    assert fit_budget(long, ["s0"], _names(long)[1:], (), WIDE) == tuple(_names(long)[1:])


def test_exports_off_one_ingest_of_large_records_all_fuse() -> None:
    plan = _fan_out("file")
    assert fit_budget(plan, ["read"], _names(plan)[1:], (), LARGE) == tuple(_names(plan)[1:])
    assert fused_peak(plan, _names(plan), (), LARGE) <= FUSION_BUDGET


def test_stored_outputs_split_the_group_within_the_budget() -> None:
    plan = _fan_out("trim")  # 28 leaves: each output is stored, held until the commit
    names = _names(plan)
    # 49 MiB batches: the ingest's stored output and one leaf's are already too much.
    assert fit_budget(plan, ["read"], names[1:], (), LARGE) == ()
    # 10 MiB batches: the input, then (1 + k) stored outputs 3 times at the commit.
    medium = BatchBytes.measured(500, 10, 10 * 2**20)
    assert fit_budget(plan, ["read"], names[1:], (), medium) == ("b0", "b1", "b2", "b3", "b4")
    assert fused_peak(plan, names[:6], (), medium) <= FUSION_BUDGET
    assert fused_peak(plan, names[:7], (), medium) > FUSION_BUDGET
    # Small batches: the whole tree fits.
    assert fit_budget(plan, ["read"], names[1:], (), SMALL) == tuple(names[1:])


def test_a_follower_left_out_takes_what_hangs_off_it_and_its_upstream_output_is_stored() -> None:
    plan = _plan([("read", "ingest", []), ("x", "trim", ["read"]), ("x2", "trim", ["x"]),
                  ("y", "file", ["read"])])  # fmt: skip
    # x with its leaf x2: read's output stored for y and x2's, 3 times each
    assert fused_peak(plan, ["read", "x", "x2"], (), LARGE) > FUSION_BUDGET
    assert fit_budget(plan, ["read"], ["x", "x2", "y"], (), LARGE) == ("y",)
    # the input, read's output, y's chunk; then read's output is stored (x reads it later)
    assert fused_peak(plan, ["read", "y"], (), LARGE) == 2 * (LARGE.records + LARGE.rows)


def test_branches_run_depth_first_so_each_output_goes_before_the_next_branch() -> None:
    steps = [("read", "ingest", [])]
    for i in range(14):
        steps += [(f"t{i}", "trim", ["read"]), (f"e{i}", "file", [f"t{i}"])]
    plan = _plan([*steps, ("all", "file", ["read"])])
    names = _names(plan)
    got = fusion_group(plan, "read", _fresh(plan, "read"), set(names[1:]))
    assert got == tuple(names[1:])  # t0, e0, t1, e1, ..., all
    # t_i's output is dropped once e_i wrote it: two outputs and an export's chunk at once
    assert fused_peak(plan, names, (), LARGE) == 3 * LARGE.records + 3 * LARGE.rows
    # 49 MiB batches: that is over the budget; the trims run after, each with its export
    assert fit_budget(plan, ["read"], list(got), (), LARGE) == ("all",)
    small = BatchBytes.measured(49, 3, 10 * 2**20)
    assert fit_budget(plan, ["read"], list(got), (), small) == got


def test_an_aggregate_holds_no_output_per_batch() -> None:
    plan = _fan_out("aggregate")
    assert fused_peak(plan, _names(plan), (), LARGE) == 2 * LARGE.records + LARGE.rows
