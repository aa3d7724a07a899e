"""A plan's preview: every step run on the first N records of the plan's ingests through the
engine's own code path, stopping before any export writes.

The sources, typing, transforms and batch computation are the engine's (`actors.steps`:
`build_source` with a record limit, `build_compute`, `compute_batch`), so a preview and a run
agree record for record on the same input. What differs is only what a run persists: a
step's output stays in memory and feeds its dependents; an export is screened (the table
export's own pure checks, `connectors.screen_export_batch`) and shown, never written; a table
ingest reads the sandbox through a read-only connection. Nothing is persisted.

Policies as in a run: a dependent of a failed step does not run (`upstream_failed`); in
`stop` mode a row error fails its step, with the error the run would fail with. The preview
still goes through the rest of that step's sample so every row error of it is listed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg2

import connectors
from actors.errors import PreviewBudgetExceeded, PreviewTimeLimit
from actors.preview_bounds import Level, bounded, clip, held_bytes, kept, levels
from actors.preview_exports import PREVIEW_RUN_ID, SAMPLE_ROWS
from actors.sources import source_impl
from actors.steps import (
    InputBatch,
    StepEnv,
    UpstreamSource,
    build_compute,
    build_source,
    compute_batch,
)
from actors.targets import target_impl
from dag import (
    BATCH_SIZE,
    InputDataError,
    Plan,
    RowError,
    RowValueError,
    Step,
    StepStatus,
    step_warnings,
    topological_order,
)
from dag.plan import ON_ROW_ERROR_STOP

DEFAULT_RECORDS = 100
MAX_RECORDS = 5000
MAX_ROW_ERRORS = 50  # per step; `row_errors_total` counts them all
MAX_HELD_BYTES = 64 * 1024 * 1024  # records held for the steps to come, in all
SLICE_RECORDS = 50  # records between two looks at the time limit


@dataclass
class StepPreview:
    """One step's preview: status, columns (with evidence for inferred ones), counters,
    sample, row errors, warnings, and its source or export."""

    name: str
    type: str
    status: str = "ok"  # ok | failed | upstream_failed
    error: str | None = None
    columns: dict[str, str] | None = None
    inferred: dict[str, str] = field(default_factory=dict)
    records_in: int = 0
    records_out: int = 0
    rejected: int = 0
    sample: list[dict[str, Any]] = field(default_factory=list)
    row_errors: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    source: dict[str, Any] | None = None
    export: dict[str, Any] | None = None
    dialect: dict[str, Any] | None = None  # a file ingest's proposed encoding/delimiter

    def as_dict(self, level: Level | None = None) -> dict[str, Any]:
        """The JSON shape (the CLI's `--json` and the API answer the same), showing what
        `level` lets it (`actors.preview_bounds`; everything when None)."""
        chars = level.value_chars if level else None
        rows = level.rows if level else SAMPLE_ROWS
        errors = level.row_errors if level else MAX_ROW_ERRORS
        return {
            "name": self.name,
            "type": self.type,
            "status": self.status,
            "error": _cut(self.error, chars),
            "columns": self.columns,
            "inferred": _cut(self.inferred, chars),
            "records_in": self.records_in,
            "records_out": self.records_out,
            "rejected": self.rejected,
            "sample": _cut(self.sample[:rows], chars),
            "row_errors": _cut(self.row_errors[:errors], chars),
            "row_errors_total": len(self.row_errors),
            "warnings": _cut(self.warnings, chars),
            "source": self.source,
            "export": _cut(_export_shown(self.export, rows), chars),
            "dialect": self.dialect,
        }


def _cut(value: Any, chars: int | None) -> Any:
    return value if chars is None else clip(value, chars)


def _export_shown(export: dict[str, Any] | None, rows: int) -> dict[str, Any] | None:
    """An export's view with at most `rows` rows (and the text of those rows only)."""
    if export is None or len(export.get("rows", ())) <= rows:
        return export
    shown = {**export, "rows": export["rows"][:rows]}
    if "text" in export:
        keep = rows + (1 if export.get("format") == "csv" else 0)  # the header line
        shown["text"] = "".join(export["text"].splitlines(keepends=True)[:keep])
    return shown


@dataclass
class PlanPreview:
    """The preview of a plan (or of one step and what it depends on)."""

    records: int
    on_row_error: str
    on_failure: str
    steps: list[StepPreview]

    @property
    def failed(self) -> bool:
        """True when a step failed: a run of this plan on this input would fail it too."""
        return any(s.status != "ok" for s in self.steps)

    def as_dict(self) -> dict[str, Any]:
        """The answer, bounded in bytes (`actors.preview_bounds`): long values cut with a
        marker, fewer sample rows and row errors when even that does not fit."""

        def build(level: Level) -> dict[str, Any]:
            return {
                "records": self.records,
                "on_row_error": self.on_row_error,
                "on_failure": self.on_failure,
                "ok": not self.failed,
                "writes": "nothing: exports are shown, not written",
                "steps": [s.as_dict(level) for s in self.steps],
            }

        return bounded(build, levels(SAMPLE_ROWS, MAX_ROW_ERRORS))


@dataclass
class _Output:
    columns: dict[str, str]
    batches: list[list[dict]]
    held_bytes: int = 0  # what `batches` count against the memory budget
    readers: int = 0  # steps still to be previewed that read it


class _MemoryUpstream(UpstreamSource):
    """The engine's upstream source (columns merged and checked the same way) over the
    dependencies' previewed output batches instead of committed ones."""

    def __init__(self, step: Step, env: StepEnv, outputs: dict[str, _Output]):
        self.outputs = outputs
        upstream = {d: (o.columns, len(o.batches)) for d, o in outputs.items()}
        super().__init__(step, replace(env, upstream=upstream))

    def batches(self, checkpoint: dict | None, records_before: int) -> Iterator[InputBatch]:
        names = list(self.columns)
        for dep in self.step.depends_on:
            output = self.outputs[dep]
            for records in output.batches:
                if list(output.columns) != names:
                    records = [{n: r.get(n) for n in names} for r in records]
                yield InputBatch(records, [], len(records), {})


def _first_rows(batches: list[list[dict]]) -> list[dict]:
    """A step's sample: its first `SAMPLE_ROWS` output records, long values cut
    (`actors.preview_bounds.kept`: the sample does not hold the step's output alive)."""
    return [kept(r) for b in batches for r in b[:SAMPLE_ROWS]][:SAMPLE_ROWS]


def _source_view(step: Step) -> dict[str, Any] | None:
    """Where an ingest reads, as its source shows it (`actors.sources`)."""
    return source_impl(step.config).view(step.config) if step.type == "ingest" else None


def _dialect(step: Step, env: StepEnv) -> dict[str, Any] | None:
    """What an ingest's input looks written in, when not as declared (a file's: its
    encoding and delimiter, `dag.propose_dialect`)."""
    return source_impl(step.config).dialect(step, env) if step.type == "ingest" else None


def _ancestors(plan: Plan, name: str) -> set[str]:
    found: set[str] = set()
    frontier = [name]
    while frontier:
        for dep in plan.step(frontier.pop()).depends_on:
            if dep not in found:
                found.add(dep)
                frontier.append(dep)
    return found


class _Previewer:
    """Previews steps in execution order, holding each one's output only until the last
    step that reads it has run, and no more of it than `max_held_bytes` in all."""

    def __init__(
        self,
        plan: Plan,
        env: StepEnv,
        records: int,
        deadline: Callable[[], None],
        readers: dict[str, int],
        max_held_bytes: int,
    ):
        self.plan = plan
        self.env = env
        self.records = records
        self.deadline = deadline
        self.outputs: dict[str, _Output] = {}
        self.readers = readers
        self.max_held_bytes = max_held_bytes
        self.held = 0
        self.shared: set[int] = set()  # ids of the long strings counted (while held)

    def step(self, step: Step) -> StepPreview:
        view = StepPreview(step.name, step.type, source=_source_view(step))
        view.dialect = _dialect(step, self.env)
        failed = [d for d in step.depends_on if d not in self.outputs]
        if failed:
            view.status = StepStatus.UPSTREAM_FAILED
            view.error = f"not run: {', '.join(failed)} did not succeed"
            return view
        try:
            self._run(step, view)
        except (InputDataError, connectors.ConnectorError, OSError, psycopg2.Error) as exc:
            view.status, view.error = StepStatus.FAILED, f"{type(exc).__name__}: {exc}".strip()
        except (PreviewTimeLimit, PreviewBudgetExceeded) as exc:
            view.status, view.error = StepStatus.FAILED, str(exc)
        finally:
            self._release(step)
        return view

    def _hold(self, step: Step, records: list[dict]) -> int:
        """Count `records` of `step`'s output against the budget; `PreviewBudgetExceeded`
        when the preview would then hold more than its budget."""
        size = held_bytes(records, self.shared)
        self.held += size
        if self.held > self.max_held_bytes:
            mib = self.max_held_bytes / 2**20
            raise PreviewBudgetExceeded(
                f"preview memory budget of {mib:g} MiB exceeded at step {step.name!r}"
                f" (its output and the outputs still to be read hold {self.held / 2**20:.1f}"
                " MiB): preview fewer records"
            )
        return size

    def _release(self, step: Step) -> None:
        """After `step`: drop the outputs no step still to come reads."""
        for name in step.depends_on:
            output = self.outputs.get(name)
            if output is None:
                continue
            output.readers -= 1
            if output.readers <= 0 and output.batches:
                self.held -= output.held_bytes
                output.batches, output.held_bytes = [], 0

    def _run(self, step: Step, view: StepPreview) -> None:
        self.deadline()
        if step.type == "ingest":
            source = build_source(step, self.env, None, limit=self.records)
        else:
            source = _MemoryUpstream(step, self.env, self.outputs)
        compute = build_compute(step, source)
        export = (
            target_impl(step.config).preview(step, self.env, source.columns)
            if step.type == "export"
            else None
        )
        inputs: list[dict] = []
        batches: list[list[dict]] = []
        errors: list[RowError] = []
        held = 0
        for batch in self._sliced(source.batches(None, 0)):
            self.deadline()
            view.columns = compute.output_columns
            if batch.records_in == 0:
                continue
            first = view.records_in + 1
            out, batch_errors = compute_batch(compute, batch, first)
            if export is not None:
                export_errors = export.write(out, first)
                if export_errors:
                    bad = {e.record for e in export_errors}
                    out = [r for i, r in enumerate(out) if first + i not in bad]
                    batch_errors += export_errors
            inputs += batch.records
            errors += batch_errors
            view.records_in += batch.records_in
            view.records_out += len(out)
            if out:
                held += self._hold(step, out)
                batches.append(out)
        self._describe(step, view, source, errors, inputs, batches)
        if errors and self.plan.on_row_error == ON_ROW_ERROR_STOP:
            e = errors[0]
            exc = RowValueError(e.reason, line=e.line, column=e.column)
            view.status, view.error = StepStatus.FAILED, f"{type(exc).__name__}: {exc}"
            view.sample = _first_rows(batches)
            return
        final = compute.finish()
        view.columns = compute.output_columns
        view.records_out += len(final)
        held += self._hold(step, final)
        batches += [final[i : i + BATCH_SIZE] for i in range(0, len(final), BATCH_SIZE)]
        view.sample = _first_rows(batches)
        if export is not None:
            view.export = export.finish(final)
        readers = self.readers.get(step.name, 0)
        if readers == 0:  # nothing reads it: only its sample stays
            self.held -= held
            batches, held = [], 0
        self.outputs[step.name] = _Output(dict(view.columns), batches, held, readers)

    @staticmethod
    def _describe(
        step: Step,
        view: StepPreview,
        source: Any,
        errors: list[RowError],
        inputs: list[dict],
        batches: list[list[dict]],
    ) -> None:
        """A step's row errors, the evidence of its inferred types and its warnings."""
        view.row_errors = [kept(e.as_dict()) for e in errors]
        view.rejected = len(errors)
        if step.type == "ingest" and source_impl(step.config).infers:
            view.inferred = dict(source.evidence)
        outputs = [r for b in batches for r in b]
        view.warnings = [
            w.as_dict()
            for w in step_warnings(step.type, step.config, inputs, outputs, view.rejected)
        ]

    def _sliced(self, batches: Iterator[InputBatch]) -> Iterator[InputBatch]:
        """The source's batches in slices of `SLICE_RECORDS`, so that the time limit is
        checked every few records (a batch of wide rows can take seconds). The slices of a
        batch go through the step's computation in order: the same output as whole."""
        for batch in batches:
            if batch.records_in <= SLICE_RECORDS or batch.row_errors:
                yield batch
                continue
            for i in range(0, len(batch.records), SLICE_RECORDS):
                part = batch.records[i : i + SLICE_RECORDS]
                yield InputBatch(part, [], len(part), batch.position)


def preview_plan(
    plan: Plan,
    *,
    data_dir: Path,
    export_dir: Path,
    records: int = DEFAULT_RECORDS,
    step: str | None = None,
    sandbox_connect: Callable[[], Any] | None = None,
    time_limit_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    max_held_bytes: int = MAX_HELD_BYTES,
) -> PlanPreview:
    """Preview `plan` on the first `records` (1..MAX_RECORDS) records of each ingest: every
    step, or with `step` that step and the steps it depends on, in execution order.

    `sandbox_connect` opens a sandbox connection for table ingests (the preview makes it
    read-only); without one a table ingest fails its step. Past `time_limit_s` the running
    step fails within a few records and the rest do not run; a step whose output would
    make the records held for the steps to come pass `max_held_bytes` fails too."""
    if not 1 <= records <= MAX_RECORDS:
        raise ValueError(f"records must be 1..{MAX_RECORDS}, got {records}")
    started = clock()

    def deadline() -> None:
        if time_limit_s is not None and clock() - started > time_limit_s:
            raise PreviewTimeLimit(f"preview time limit of {time_limit_s:g} s exceeded")

    env = StepEnv(
        run_id=PREVIEW_RUN_ID,
        data_dir=Path(data_dir),
        export_dir=Path(export_dir),
        reject_dir=Path(export_dir),
        state_conn=None,
        sandbox_connect=read_only_connect(sandbox_connect),
    )
    wanted = None if step is None else {step, *_ancestors(plan, step)}
    readers = {
        s.name: sum(1 for d in plan.dependents(s.name) if wanted is None or d in wanted)
        for s in plan.steps
    }
    previewer = _Previewer(plan, env, records, deadline, readers, max_held_bytes)
    steps = [
        previewer.step(plan.step(name))
        for name in topological_order(plan)
        if wanted is None or name in wanted
    ]
    return PlanPreview(records, plan.on_row_error, plan.on_failure, steps)


def read_only_connect(connect: Callable[[], Any] | None) -> Callable[[], Any]:
    """`connect` returning read-only sessions: the preview can read the sandbox, not change it."""

    def open_read_only() -> Any:
        if connect is None:
            raise connectors.TableRefused("a table ingest needs the sandbox database")
        conn = connect()
        conn.set_session(readonly=True)
        return conn

    return open_read_only
