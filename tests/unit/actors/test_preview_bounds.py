"""A preview is bounded by bytes as well as by records (actors.preview, preview_bounds): long
values are cut in the answer with a marker giving their length, an answer of wide rows over
many steps stays under its byte limit, the records held for the steps to come stay under a
memory budget (and are let go once no later step reads them), and the time limit stops a
step within a batch. File ingests only: no database."""

from __future__ import annotations

import json
from pathlib import Path

from actors.preview import preview_plan
from actors.preview_bounds import MAX_ANSWER_BYTES, MAX_VALUE_CHARS, Cut, clip
from dag import parse_plan


def _chain(n_transforms: int) -> dict:
    """An ingest of in.csv and a chain of `n_transforms` trims of column `a`."""
    steps = [{"name": "read", "type": "ingest",
              "config": {"source": "file", "path": "in.csv"}}]  # fmt: skip
    for i in range(n_transforms):
        steps.append(
            {"name": f"t{i}", "type": "transform", "depends_on": [steps[-1]["name"]],
             "config": {"op": "trim", "columns": ["a"]}}
        )  # fmt: skip
    return {"steps": steps}


def _preview(tmp_path: Path, text: str, plan: dict, **kwargs):
    (tmp_path / "in.csv").write_text(text)
    return preview_plan(parse_plan(plan), data_dir=tmp_path, export_dir=tmp_path / "x", **kwargs)


def test_clip_cuts_long_strings_anywhere_and_gives_their_length() -> None:
    assert clip("abc", 3) == "abc"
    assert clip({"k": ["abcdef", 5, None]}, 3) == {"k": ["abc\u2026 [truncated: 6 chars]", 5, None]}


def test_a_long_value_is_cut_in_the_answer_with_its_full_length(tmp_path: Path) -> None:
    big = "x" * (10 * 2**20)
    preview = _preview(tmp_path, f"id,a\n1,{big}\n2,short\n", _chain(2), records=5)
    assert not preview.failed
    answer = preview.as_dict()
    size = len(json.dumps(answer))
    assert size < 100_000, size
    shown = answer["steps"][2]["sample"][0]["a"]
    assert shown == "x" * MAX_VALUE_CHARS + f"\u2026 [truncated: {len(big)} chars]"
    assert answer["steps"][2]["sample"][1]["a"] == "short"
    assert answer["truncated"]["value_chars"] == MAX_VALUE_CHARS
    # The sample keeps the value's first characters and its length, not the value.
    kept = preview.steps[2].sample[0]["a"]
    assert isinstance(kept, Cut) and kept == big[:MAX_VALUE_CHARS] and kept.chars == len(big)
    assert clip(kept, 16) == "x" * 16 + f"\u2026 [truncated: {len(big)} chars]"


def test_a_file_export_shows_a_long_value_cut_in_its_text(tmp_path: Path) -> None:
    big = "y" * 300
    plan = _chain(1)
    plan["steps"].append(
        {"name": "out", "type": "export", "depends_on": [plan["steps"][-1]["name"]],
         "config": {"target": "file", "path": "o.csv", "format": "csv"}}
    )  # fmt: skip
    preview = _preview(tmp_path, f"id,a\n1,{big}\n", plan, records=5)
    export = preview.as_dict()["steps"][-1]["export"]
    assert export["text"] == f"id,a\n1,{'y' * 16}\u2026 [truncated: 300 chars]\n"
    assert export["rows"] == [{"id": 1, "a": "y" * 200 + "\u2026 [truncated: 300 chars]"}]


def test_an_answer_that_cuts_nothing_says_so(tmp_path: Path) -> None:
    answer = _preview(tmp_path, "id,a\n1, b \n", _chain(1), records=5).as_dict()
    assert answer["truncated"] is None
    assert answer["steps"][1]["sample"] == [{"id": 1, "a": "b"}]


def test_wide_rows_over_many_steps_fit_the_answer_limit(tmp_path: Path) -> None:
    names = [f"c{i:04d}" for i in range(1000)]
    row = ",".join("v" * 150 for _ in names)
    text = "a," + ",".join(names) + "\n" + "".join(f"{i},{row}\n" for i in range(40))
    preview = _preview(tmp_path, text, _chain(29), records=40)
    assert not preview.failed
    answer = preview.as_dict()
    assert len(json.dumps(answer).encode()) <= MAX_ANSWER_BYTES
    assert answer["truncated"]["sample_rows"] < 5  # it had to show fewer rows
    assert [s["records_out"] for s in answer["steps"]] == [40] * 30  # counters are whole


def test_the_memory_budget_fails_the_step_that_would_pass_it(tmp_path: Path) -> None:
    text = "id,a\n" + "".join(f"{i},{'y' * 1000}\n" for i in range(1, 2001))  # ~2.8 MiB a step
    # each step's output is let go once the next one ran: a chain holds two at a time
    fits = _preview(tmp_path, text, _chain(5), records=2000, max_held_bytes=7 * 2**20)
    assert not fits.failed, [s.error for s in fits.steps]
    over = _preview(tmp_path, text, _chain(5), records=2000, max_held_bytes=3 * 2**20)
    statuses = [s.status for s in over.steps]
    assert statuses[:1] == ["ok"] and statuses[1] == "failed", statuses
    assert "preview memory budget of 3 MiB exceeded at step 't0'" in over.steps[1].error
    assert set(statuses[2:]) == {"upstream_failed"}


def test_the_time_limit_stops_a_step_within_a_batch(tmp_path: Path) -> None:
    text = "id,a\n" + "".join(f"{i},v\n" for i in range(1, 501))  # one batch of 500 records
    ticks = iter(range(10_000))
    preview = _preview(
        tmp_path, text, _chain(0), records=500, time_limit_s=3.5, clock=lambda: next(ticks)
    )
    read = preview.steps[0]
    assert read.status == "failed" and "time limit of 3.5 s" in read.error
    assert 0 < read.records_in < 500  # stopped inside the batch, not at its end
