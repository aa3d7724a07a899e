"""Live progress of a run for `etl run --wait` and `etl runs watch`: one line per step with
its state, records in so far / total (where known), records out, rejected, rate, attempts
and executor.

On a terminal the lines update in place (rich's `Live` display); otherwise (a pipe, a log
file, CI) a plain line is printed whenever a step changes state, attempt or executor, and
for a running step at most every `PLAIN_PROGRESS_S` seconds while its records grow. The run
is polled through the API; the caller turns its final status into an exit status with
`exit_status`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dag import RUN_FINAL, RunStatus, StepStatus, attempts_that_ran
from dag.durations import elapsed_s, seconds_text
from dag.labels import distinct_labels
from service.client.http import ApiClient

# `--wait` / `watch` exit statuses by how the run ended (documented in docs/cli.md).
EXIT_STATUS = {
    RunStatus.SUCCEEDED: 0,
    RunStatus.FAILED: 1,
    RunStatus.CANCELED: 3,
    RunStatus.SKIPPED: 4,
}
POLL_S = 0.5
PLAIN_PROGRESS_S = 2.0
_STYLE = {
    StepStatus.SUCCEEDED: "green",
    StepStatus.FAILED: "bold red",
    StepStatus.UPSTREAM_FAILED: "red",
    StepStatus.CANCELED: "yellow",
    StepStatus.NOT_RUN: "dim",
    StepStatus.RUNNING: "cyan",
    StepStatus.RETRY_WAIT: "magenta",
    StepStatus.PENDING: "dim",
    RunStatus.QUEUED: "dim",
    RunStatus.SKIPPED: "yellow",
}


def exit_status(run: Mapping[str, Any]) -> int:
    """0 only for a succeeded run; see `EXIT_STATUS`."""
    return EXIT_STATUS.get(str(run.get("status")), 1)


@dataclass(frozen=True)
class StepLine:
    """What one step's progress line shows."""

    name: str
    type: str
    status: str
    done: int  # records in so far
    total: int | None
    rate: float | None  # records per second
    attempts: int
    executor: str
    error: str | None
    seconds: float | None = None  # how long it took, or has been running; None: not started
    finished: bool = False
    out: int = 0  # records out so far (a filter's fewer, an aggregate's groups)
    rejected: int = 0  # rows set aside as rejects (`on_row_error: reject`)

    def took(self) -> str:
        """`took 4.2 s`, `running for 3 min 04 s` (a step not finished), or `-`."""
        return took_text(self.seconds, self.finished)

    def records(self) -> str:
        return f"{self.done}/{self.total}" if self.total is not None else str(self.done)

    def rate_text(self) -> str:
        return f"{self.rate:,.0f}/s" if self.rate else "-"


@dataclass
class RateMeter:
    """Records-per-second of running steps from successive observations (client clock only,
    never compared with the server's)."""

    clock: Callable[[], float] = time.monotonic
    first: dict[str, tuple[float, int]] = field(default_factory=dict)

    def rate(self, step: str, done: int) -> float | None:
        now = self.clock()
        if step not in self.first or done < self.first[step][1]:  # new, or started over
            self.first[step] = (now, done)
            return None
        t0, n0 = self.first[step]
        return (done - n0) / (now - t0) if now > t0 and done > n0 else None


def took_text(seconds: float | None, finished: bool) -> str:
    """`took 4.2 s` once finished, `running for 4.2 s` until then, `-` if never started."""
    if seconds is None:
        return "-"
    return f"{'took' if finished else 'running for'} {seconds_text(seconds)}"


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def elapsed(item: Mapping[str, Any], now: datetime | None) -> float | None:
    """Seconds a run or step (of the API) took, or has been running until `now` (the
    server's clock: `ApiClient.answered_at`; this machine's only when unknown)."""
    return elapsed_s(
        _time(item.get("started_at")), _time(item.get("finished_at")), now or datetime.now(UTC)
    )


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds between two ISO-8601 times of the API (both the server's clock), or None."""
    if not start or not end:
        return None
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return delta.total_seconds()


def step_lines(
    run: Mapping[str, Any],
    depends_on: Mapping[str, list[str]],
    meter: RateMeter,
    now: datetime | None = None,
) -> list[StepLine]:
    """The progress lines of `run` (an API run). `depends_on` (step -> inputs, from the
    run's revision) gives a step's total: what its inputs produced, once they all have;
    `now` (the server's clock) how long a running step has been running."""
    by_name = {s["name"]: s for s in run.get("steps", [])}
    lines = []
    for s in run.get("steps", []):
        done = int(s.get("records_in") or 0)
        inputs = [by_name[d] for d in depends_on.get(s["name"], []) if d in by_name]
        total: int | None = None
        if s["status"] == StepStatus.SUCCEEDED:
            total = done
        elif inputs and all(i["status"] == StepStatus.SUCCEEDED for i in inputs):
            total = sum(int(i.get("records_out") or 0) for i in inputs)
        if s["status"] == StepStatus.RUNNING:
            rate = meter.rate(s["name"], done)
        else:
            took = seconds_between(s.get("started_at"), s.get("finished_at"))
            rate = done / took if took and done else None
        attempts = attempts_that_ran(s["status"], s.get("attempts") or [])
        executor = (attempts[-1].get("executor") or "") if attempts else ""
        lines.append(
            StepLine(
                name=s["name"],
                type=s.get("type", ""),
                status=s["status"],
                done=done,
                total=total,
                rate=rate,
                attempts=len(attempts),
                executor=executor.split(":", 1)[0],  # name:boot-id -> name
                error=s.get("error"),
                seconds=elapsed(s, now),
                finished=bool(s.get("finished_at")),
                out=int(s.get("records_out") or 0),
                rejected=int(s.get("rejected") or 0),
            )
        )
    return lines


def run_header(run: Mapping[str, Any], now: datetime | None = None) -> str:
    """`run ID STATUS` plus the queue position, skip reason or first error; with `now`
    (the server's clock) also how long it took or has been running, once it started."""
    text = f"run {run['id']} {run['status']}"
    seconds = elapsed(run, now) if now is not None else None
    if seconds is not None:
        text += f" ({took_text(seconds, bool(run.get('finished_at')))})"
    if run.get("queue_position"):
        text += f" (queue position {run['queue_position']})"
    if run.get("reason"):
        text += f" ({run['reason']})"
    if run.get("status") in RUN_FINAL and run.get("error"):
        text += f": {run['error']}"
    return text


COLUMNS = (
    "step", "type", "state", "duration", "records", "out", "rejected", "rate", "attempts",
    "executor",
)  # fmt: skip
NAME_ROOM = 20  # a narrow terminal drops columns (executor, rate, type, out, duration)
# to keep this much room for step names
DROPPED_FIRST = ("executor", "rate", "type", "out", "duration")


def table(
    run: Mapping[str, Any],
    lines: list[StepLine],
    width: int | None = None,
    now: datetime | None = None,
) -> Table:
    """The rich table of a run's steps (terminal display), titled by `run_header` (with
    `now`: the run's duration). A step's duration is how long it took, or has been running
    (the state column says which). Within `width` terminal columns: the executor, rate,
    type, out and duration columns go (in that order) while step names would get less than
    NAME_ROOM characters, and names too long even then are shortened distinctly
    (`dag.labels`): two names sharing a long prefix never print as the same text, as
    rich's own cut at the end would make them."""
    rows = [
        {"step": ln.name, "type": ln.type, "state": ln.status,
         "duration": seconds_text(ln.seconds) if ln.seconds is not None else "-",
         "records": ln.records(), "out": str(ln.out), "rejected": str(ln.rejected),
         "rate": ln.rate_text(), "attempts": str(ln.attempts),
         "executor": ln.executor}
        for ln in lines
    ]  # fmt: skip
    shown = [c for c in COLUMNS if c != "rejected" or any(ln.rejected for ln in lines)]
    labels = {ln.name: ln.name for ln in lines}
    if width is not None and rows:

        def room() -> int:
            others = sum(max(len(c), *(len(r[c]) for r in rows)) for c in shown[1:])
            return width - others - (3 * len(shown) + 1)  # padding and rules

        longest = max(len(ln.name) for ln in lines)
        for column in DROPPED_FIRST:
            if room() >= min(NAME_ROOM, longest):
                break
            shown.remove(column)
        labels = distinct_labels([ln.name for ln in lines], max(room(), len("step")))
    t = Table(title=run_header(run, now), title_justify="left", expand=False)
    for column in shown:
        right = column in ("duration", "records", "out", "rejected", "rate", "attempts")
        t.add_column(column, justify="right" if right else "left", no_wrap=True)
    for ln, row in zip(lines, rows, strict=True):
        cells: list[str | Text] = [row[c] for c in shown]
        cells[0] = labels[ln.name]
        cells[shown.index("state")] = Text(ln.status, style=_STYLE.get(ln.status, ""))
        t.add_row(*cells)
    return t


def plain_line(ln: StepLine, name_width: int = 24) -> str:
    """One step as a plain text line (no terminal)."""
    text = (
        f"{ln.name:<{name_width}} {ln.status:<15} records {ln.records():>13} out {ln.out:>6}"
        f"{f'  rejected {ln.rejected}' if ln.rejected else ''}"
        f"  rate {ln.rate_text():>9}  attempts {ln.attempts}  executor {ln.executor or '-'}"
        f"  {ln.took()}"
    )
    if ln.error and ln.status == StepStatus.FAILED:
        text += f"  error: {ln.error}"
    return text


def print_run(
    console: Console,
    run: Mapping[str, Any],
    depends_on: Mapping[str, list[str]],
    now: datetime | None = None,
):
    """A run's steps once, with how long the run and each step took or have been running
    until `now` (the server's clock): a table on a terminal, plain lines otherwise."""
    now = now or datetime.now(UTC)
    lines = step_lines(run, depends_on, RateMeter(), now)
    if console.is_terminal:
        console.print(table(run, lines, console.width, now))
    else:
        console.print(run_header(run, now), soft_wrap=True, highlight=False)
        width = max((len(ln.name) for ln in lines), default=0)
        for ln in lines:
            console.print(plain_line(ln, width), soft_wrap=True, highlight=False, markup=False)


def plan_inputs(client: ApiClient, run: Mapping[str, Any]) -> dict[str, list[str]]:
    """step -> depends_on of the run's own revision."""
    revision = client.get_revision(run["pipeline_id"], run["revision"])
    steps = (revision.get("plan") or {}).get("steps") or []
    return {s["name"]: list(s.get("depends_on") or []) for s in steps if isinstance(s, dict)}


def wait(
    client: ApiClient,
    run_id: str,
    *,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Poll a run until it ends, showing nothing; returns the final run."""
    run = client.get_run(run_id)
    while run["status"] not in RUN_FINAL:
        sleep(poll_s)
        run = client.get_run(run_id)
    return run


def watch(
    client: ApiClient,
    run_id: str,
    console: Console,
    *,
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Follow a run until it ends, showing its progress on `console`; returns the final
    run. Ctrl-C stops watching (the run goes on) and propagates `KeyboardInterrupt`."""
    run = client.get_run(run_id)
    inputs = plan_inputs(client, run)
    meter = RateMeter(clock)
    if console.is_terminal:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            while True:
                now = client.answered_at
                live.update(table(run, step_lines(run, inputs, meter, now), console.width, now))
                if run["status"] in RUN_FINAL:
                    break
                sleep(poll_s)
                run = client.get_run(run_id)
        return run
    return _watch_plain(client, run, inputs, console, poll_s=poll_s, clock=clock, sleep=sleep)


def _watch_plain(
    client: ApiClient,
    run: dict,
    inputs: Mapping[str, list[str]],
    console: Console,
    *,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> dict:
    meter = RateMeter(clock)
    shown: dict[str, tuple[str, int, str]] = {}
    progress_at: dict[str, tuple[float, int]] = {}
    header = ""

    def say(text: str) -> None:
        console.print(text, soft_wrap=True, highlight=False, markup=False)

    while True:
        if run_header(run) != header:
            header = run_header(run)
            say(header)
        lines = step_lines(run, inputs, meter, client.answered_at)
        width = max((len(ln.name) for ln in lines), default=0)
        for ln in lines:
            key = (ln.status, ln.attempts, ln.executor)
            last = progress_at.get(ln.name)
            grew = last is not None and ln.done > last[1] and clock() - last[0] >= PLAIN_PROGRESS_S
            if shown.get(ln.name) != key or (ln.status == StepStatus.RUNNING and grew):
                shown[ln.name] = key
                progress_at[ln.name] = (clock(), ln.done)
                say(plain_line(ln, width))
        if run["status"] in RUN_FINAL:
            return run
        sleep(poll_s)
        run = client.get_run(run["id"])
