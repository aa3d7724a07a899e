"""`etl preview PLAN.json [--records N] [--step NAME] [--param NAME=VALUE ...] [--json]`:
what a plan does to the first N records of its inputs, step by step, before it is saved (see
`actors.preview`), with the parameter values substituted as a trigger would.

Offline: file ingests need no database; a table ingest reads the sandbox read-only. Exit 0
when every step succeeds, 1 when one fails (a row error in `stop` mode, a config that does
not fit the data, a refused path), 2 for an invalid plan (with `etl validate`'s errors)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from actors.preview import DEFAULT_RECORDS, MAX_RECORDS, PlanPreview, StepPreview, preview_plan
from actors.preview_bounds import MAX_VALUE_CHARS, clip
from actors.sources import SOURCE_IMPLS
from actors.targets import TARGET_IMPLS
from dag import StepStatus
from dag.plan import parse_plan
from ddl import connector
from service.cli.plans import bind_values
from service.client.command import new_console
from service.client.params import add_param_option
from service.config import Config
from service.plandoc import read_plan_document

ROW_ERRORS_SHOWN = 10
RAW_SHOWN = 120  # characters of a row error's raw value (the JSON answer has it whole)
_STATUS_STYLE = {
    "ok": "green",
    StepStatus.FAILED: "bold red",
    StepStatus.UPSTREAM_FAILED: "yellow",
}


def records_arg(text: str) -> int:
    """`--records`: an integer 1..MAX_RECORDS."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= MAX_RECORDS:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_RECORDS}, got {value}")
    return value


def configure_preview(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PLAN.json")
    parser.add_argument(
        "--records",
        type=records_arg,
        default=DEFAULT_RECORDS,
        metavar="N",
        help=f"records read from each ingest (default {DEFAULT_RECORDS}, at most {MAX_RECORDS})",
    )
    parser.add_argument("--step", metavar="NAME", help="only this step (and what it needs)")
    parser.add_argument("--json", action="store_true", help="the API's JSON answer")
    add_param_option(parser)


def run_preview(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Preview the plan in `args.path`; print the per-step view (or JSON); exit status."""
    out = out or sys.stdout
    doc = read_plan_document(args.path)
    problems = list(doc.problems)
    if not problems and args.step is not None and args.step not in _step_names(doc.plan):
        problems.append(("step", f"no step {args.step!r} in the plan"))
    if not problems:
        plan, problems = bind_values(doc.plan, args.param)
    if problems:
        _print_invalid(problems, as_json=args.json, out=out)
        return 2
    cfg = Config.from_env()

    connect_sandbox = connector(
        cfg.sandbox_url, "etl-preview", connect_timeout_s=5, statement_timeout_s=10
    )
    preview = preview_plan(
        parse_plan(plan),
        data_dir=cfg.data_dir,
        export_dir=cfg.export_dir,
        records=args.records,
        step=args.step,
        sandbox_connect=connect_sandbox,
    )
    if args.json:
        out.write(json.dumps(preview.as_dict(), ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        render_preview(preview, new_console(file=out, soft_wrap=False))
    return 1 if preview.failed else 0


def _step_names(plan: Any) -> list[str]:
    return [s["name"] for s in plan["steps"]]


def _print_invalid(problems: list[tuple[str, str]], *, as_json: bool, out: TextIO) -> None:
    if as_json:
        details = [{"field": f, "message": m} for f, m in problems]
        error = {"code": "invalid_plan", "message": "the plan is invalid", "details": details}
        out.write(json.dumps({"error": error}, ensure_ascii=False, indent=2) + "\n")
        return
    for field, message in problems:
        out.write(f"{field}: {message}\n")


def render_preview(preview: PlanPreview, console: Console) -> None:
    """The per-step view of a preview for a terminal."""
    console.print(
        f"[bold]preview[/] of the first {preview.records} record(s) per ingest · "
        f"on_row_error={preview.on_row_error} · nothing is written"
    )
    for step in preview.steps:
        _render_step(step, console)
    failed = [s.name for s in preview.steps if s.status != "ok"]
    if failed:
        console.print(f"\n[bold red]{len(failed)} step(s) would fail:[/] {', '.join(failed)}")
    else:
        console.print(f"\n[green]all {len(preview.steps)} step(s) ok[/]")


def _render_step(step: StepPreview, console: Console) -> None:
    style = _STATUS_STYLE.get(step.status, "")
    console.print()
    console.rule(
        f"[bold]{escape(step.name)}[/] ({step.type}{_where(step)}) [{style}]{step.status}[/]",
        align="left",
    )
    if step.error:
        console.print(f"[{style}]error:[/] {escape(step.error)}")
    if step.dialect:
        console.print(f"[yellow]dialect[/] {escape(step.dialect['message'])}")
    if step.status == StepStatus.UPSTREAM_FAILED:
        return
    console.print(
        f"records in {step.records_in} · out {step.records_out} · rejected {step.rejected}"
    )
    if step.columns:
        parts = []
        for name, kind in step.columns.items():
            how = " (inferred)" if name in step.inferred else ""
            parts.append(f"{escape(name)} [cyan]{kind}[/]{how}")
        console.print("columns: " + ", ".join(parts))
        for name, why in step.inferred.items():
            console.print(f"  {escape(name)}: {escape(why)}")
    if step.columns and step.records_out and step.export is None:
        console.print(_records_table(step.sample, list(step.columns), f"first {len(step.sample)}"))
    for w in step.warnings:
        console.print(f"[yellow]warning[/] {w['code']}: {escape(w['message'])}")
    if step.row_errors:
        console.print(_errors_table(step.row_errors))
    if step.export:
        _render_export(step.export, console)


def _where(step: StepPreview) -> str:
    if step.source is None:
        return ""
    return SOURCE_IMPLS[step.source["source"]].where(step.source)


def _cell(value: Any) -> str:
    """A value as the table shows it: a long string cut as in the JSON answer."""
    if value is None:
        return "[dim]null[/]"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return escape(clip(text, MAX_VALUE_CHARS) if isinstance(value, str) else text)


def _records_table(rows: list[dict], names: list[str], title: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", show_edge=False)
    for name in names:
        table.add_column(escape(name), overflow="fold")
    for row in rows:
        table.add_row(*[_cell(row.get(n)) for n in names])
    return table


def _errors_table(errors: list[dict]) -> Table:
    shown = errors[:ROW_ERRORS_SHOWN]
    more = f", first {len(shown)}" if len(errors) > len(shown) else ""
    table = Table(
        box=box.SIMPLE_HEAD,
        title=f"row errors ({len(errors)}{more})",
        title_justify="left",
        show_edge=False,
    )
    for name in ("line", "record", "column", "reason", "raw"):
        table.add_column(name, overflow="fold")
    for e in shown:
        raw = e["raw"] if isinstance(e["raw"], str) else json.dumps(e["raw"], ensure_ascii=False)
        raw = raw if len(raw) <= RAW_SHOWN else raw[: RAW_SHOWN - 1] + "…"
        table.add_row(
            _cell(e["line"]),
            _cell(e["record"]),
            _cell(e["column"]),
            escape(e["reason"]),
            escape(raw),
        )
    return table


def _render_export(export: dict[str, Any], console: Console) -> None:
    """What an export would write, in its target's words (`actors.targets`)."""
    shown = TARGET_IMPLS[export["target"]].view_text(export)
    console.print(
        "".join(f"[bold]{escape(t)}[/]" if bold else escape(t) for t, bold in shown.headline)
    )
    if shown.text is not None:
        console.print(escape(shown.text.rstrip("\n")) or "[dim](empty)[/]", soft_wrap=True)
    elif shown.rows:
        console.print(_records_table(shown.rows, list(shown.rows[0]), "first rows"))
