"""`python -m bench.attempt_walk`: the shape of one attempt's walk through the engine.

One fused attempt (a CSV ingest of 3 batches, a transform, a table export staged in the
batches' commits and a file export, all in one group) runs in this process on a fresh
database, its main thread profiled from claim to commit. Printed: the engine's function
bodies it stays in (`actors/`), the modules they live in, the `return` statements in those
bodies, and the calls that enter `actors/runner.py` or `actors/attempt.py` from another
engine module (distinct caller -> callee edges, and how many times they happen). Not a
test: nothing here asserts."""

from __future__ import annotations

import ast
import itertools
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import psycopg2

import ddl
from actors import ExecutorSettings, StepRunner, advance_pipeline
from bench.admission_db import fresh_pipeline

ENGINE = Path(__file__).resolve().parents[1] / "actors"
DRIVERS = ("runner.py", "attempt.py")
PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "p.csv", "columns": {"id": "int", "n": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
        {"name": "to_table", "type": "export", "depends_on": ["clean"],
         "config": {"target": "table", "table": "walk_people", "key": "id"}},
        {"name": "to_file", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": "p.jsonl"}},
    ],
}  # fmt: skip


def _returns(path: str) -> dict[int, tuple[str, int]]:
    """First line (decorators included) -> (name, its own `return` statements)."""
    found: dict[int, tuple[str, int]] = {}

    def own_returns(fn: ast.AST) -> int:
        n, pending = 0, list(ast.iter_child_nodes(fn))
        while pending:
            node = pending.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            n += isinstance(node, ast.Return)
            pending.extend(ast.iter_child_nodes(node))
        return n

    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[first] = found[node.lineno] = (node.name, own_returns(node))
    return found


class Walk:
    """The profiled walk, read once: a function body already seen is not entered again
    (the batch loop is read as one pass), so the walk is the sequence of modules that
    first calls and their returns pass through."""

    def __init__(self) -> None:
        self.stays: set[tuple[str, int]] = set()
        self.entries: Counter[tuple[str, str]] = Counter()
        self.path: list[str] = []  # the module of every step of the walk
        self.stack: list = []  # the engine frames being read
        self.skipped: set[int] = set()  # frames of bodies read before (and what they call)
        self.firsts: list[str] = []  # the bodies, in the order the walk enters them
        self.lines: list[tuple[str, int]] = []  # and where they start

    def __call__(self, frame, event, _arg) -> None:
        code = frame.f_code
        path = Path(code.co_filename)
        if ENGINE not in path.parents or code.co_name.startswith("<"):
            return
        if event == "return":
            self.skipped.discard(id(frame))
            if self.stack and self.stack[-1] is frame:
                self.stack.pop()
                if self.stack:
                    self.path.append(_module(self.stack[-1].f_code))
            return
        if event != "call":
            return
        key = (code.co_filename, code.co_firstlineno)
        seen = key in self.stays or any(id(f) in self.skipped for f in _callers(frame))
        self.stays.add(key)
        self._count_entry(frame, path)
        if seen:
            self.skipped.add(id(frame))
            return
        self.stack.append(frame)
        self.path.append(_module(code))
        self.firsts.append(f"{_module(code)}:{code.co_qualname}")
        self.lines.append((_module(code), code.co_firstlineno))

    def _count_entry(self, frame, path: Path) -> None:
        if path.name not in DRIVERS:
            return
        caller = frame.f_back
        while caller is not None and ENGINE not in Path(caller.f_code.co_filename).parents:
            caller = caller.f_back
        if caller is not None and Path(caller.f_code.co_filename).name != path.name:
            self.entries[(_name(caller.f_code), f"{path.name}:{frame.f_code.co_qualname}")] += 1

    def report(self) -> None:
        tables = {f: _returns(f) for f, _ in self.stays}
        returns = sum(tables[f].get(line, ("?", 0))[1] for f, line in self.stays)
        modules = sorted({_module_of(f) for f, _ in self.stays})
        stays = [m for i, m in enumerate(self.path) if i == 0 or self.path[i - 1] != m]
        print(f"function bodies: {len(self.stays)}, their return statements: {returns}")
        print(f"modules: {len(modules)}: {', '.join(modules)}")
        print(f"walk read once: {len(stays)} stays in {len(set(stays))} modules,")
        print(f"  {len(stays) - len(set(stays))} of them back in a module visited before")
        for driver in DRIVERS:
            starts = [line for m, line in self.lines if m == f"actors/{driver}"]
            up = sum(1 for a, b in itertools.pairwise(starts) if b < a)
            print(f"actors/{driver}: {len(starts)} bodies entered, {up} of them above the one")
            print("  entered before it (the module read upwards)")
            back = sum(1 for m in stays if m == f"actors/{driver}") - 1
            edges = {e: n for e, n in self.entries.items() if e[1].startswith(driver)}
            print(f"actors/{driver}: walked back into {max(back, 0)} times; called from")
            print(f"  other engine modules over {len(edges)} edges, {sum(edges.values())} calls")
            for (caller, callee), n in sorted(edges.items()):
                print(f"    {caller} -> {callee} x{n}")


def _callers(frame):
    f = frame.f_back
    while f is not None:
        yield f
        f = f.f_back


def _module(code) -> str:
    return _module_of(code.co_filename)


def _module_of(filename: str) -> str:
    return str(Path(filename).relative_to(ENGINE.parent))


def _name(code) -> str:
    return f"{Path(code.co_filename).name}:{code.co_qualname}"


def main() -> None:
    url, pid = fresh_pipeline("etl_bench_attempt_walk", "walk", PLAN)
    root = Path(tempfile.mkdtemp())
    for d in ("data", "exports", "rejects"):
        (root / d).mkdir()
    lines = (f'{i},"  Person   {i} ",{i * 10}\n' for i in range(1, 1201))
    (root / "data" / "p.csv").write_text("id,name,n\n" + "".join(lines))
    runner = StepRunner(
        ExecutorSettings(
            name="walk",
            owner="walk:1",
            lease_ttl_s=60,
            heartbeat_s=30,
            step_timeout_s=120,
            data_dir=root / "data",
            export_dir=root / "exports",
            reject_dir=root / "rejects",
            sandbox_in_state=True,
        ),
        connect_state=lambda: psycopg2.connect(url),
        connect_sandbox=lambda: psycopg2.connect(url),
        connect_commits=lambda: ddl.connect(url, "walk", asynchronous=True),
        wake_run=lambda *a: None,
        wake_attempt=lambda *a: None,
    )
    conn = psycopg2.connect(url)
    rid = str(uuid.uuid4())
    with conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id,"
            " created_by) VALUES (%s, %s, 1, 'queued', %s, 't', 't')",
            (rid, pid, rid),
        )
    (attempt_id, _trace), *rest = advance_pipeline(conn, pid).attempts
    walk = Walk()
    sys.setprofile(walk)
    outcome = runner.run_attempt(attempt_id)
    sys.setprofile(None)
    with conn.cursor() as cur:
        cur.execute("SELECT name, status FROM step_runs WHERE run_id = %s ORDER BY 1", (rid,))
        print(f"attempt {outcome}; steps: {cur.fetchall()}; other attempts: {len(rest)}")
    conn.close()
    walk.report()
    if "-v" in sys.argv:
        print("\n".join(walk.firsts))


if __name__ == "__main__":
    main()
