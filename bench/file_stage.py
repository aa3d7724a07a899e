"""`python -m bench.file_stage`: a file export's chunks staged as the engine stages them (one
chunk log per attempt, `connectors.chunklog`) against a file per chunk (a temporary file
flushed, renamed into place and its directory flushed, for every chunk), in the same run
(issue 36). Not a test: nothing here asserts.

The chunks are those of the 11-step plan's `jfk_file` export (`bench.real_dag`): the
JSONL lines of `flights.csv`'s JFK records (`encode_jsonl`), one chunk per batch of 500
records, 674 chunks. Each form stages every chunk, then publishes the file; the forms run
interleaved in every repeat, each into a stage of its own under `--dir` (default
`var/bench/file_stage`: the file system a topology's exports use).

Printed: the medians over `--repeat` repeats with their ranges of the staging's wall time
and this process's CPU (user + system), the publish's wall time, and whether both forms
published the same bytes."""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path

from bench.parts import typed_columns
from bench.real_dag import spread
from connectors import encode_jsonl, export_file
from connectors.chunklog import fsync_dir
from dag import Columns
from drills.datasets import flights_csv

RUN = uuid.UUID("6b3f1d2e-8a4c-4e5f-9d0a-7c1b2e3f4a5b")


def jfk_chunks() -> list[bytes]:
    """The `jfk_file` export's chunk of every batch of `flights.csv`."""
    columns, lists = typed_columns(flights_csv(), ("NA",))
    names = list(columns)
    at = names.index("origin")
    chunks = []
    for batch in lists:
        keep = [i for i, origin in enumerate(batch[at]) if origin == "JFK"]
        chunks.append(encode_jsonl(Columns(names, [[c[i] for i in keep] for c in batch])))
    return chunks


def per_chunk_files(stage: Path, chunks: list[bytes]) -> None:
    """Every chunk its own file: written to a temporary name, flushed, renamed, the
    directory flushed."""
    stage.mkdir(parents=True)
    for seq, data in enumerate(chunks):
        path = stage / f"{seq:08d}.chunk"
        tmp = stage / f".{path.name}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        fsync_dir(stage)


def publish_files(stage: Path, final: Path, n: int) -> None:
    """The per-chunk files concatenated into `final`, flushed."""
    with open(final, "xb") as out:
        for seq in range(n):
            with open(stage / f"{seq:08d}.chunk", "rb") as f:
                shutil.copyfileobj(f, out, 1024 * 1024)
        out.flush()
        os.fsync(out.fileno())


def one_form(form: str, base: Path, chunks: list[bytes]) -> tuple[float, float, float, str]:
    """(staging wall s, staging CPU s, publish wall s, md5 of the published file)."""
    shutil.rmtree(base, ignore_errors=True)
    wall, cpu = time.perf_counter(), time.process_time()
    if form == "chunk log":
        f = export_file(base, RUN, "jfk_file", "jfk.jsonl")
        for seq, data in enumerate(chunks):
            f.write_chunk(seq, data)
        final = f.final_path
    else:
        final = base / "jfk.jsonl"
        per_chunk_files(base / "stage", chunks)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    published = time.perf_counter()
    if form == "chunk log":
        f.publish(len(chunks))
    else:
        publish_files(base / "stage", final, len(chunks))
    published = time.perf_counter() - published
    digest = hashlib.md5(final.read_bytes()).hexdigest()
    shutil.rmtree(base, ignore_errors=True)
    return wall, cpu, published, digest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.file_stage", description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("var/bench/file_stage"))
    args = parser.parse_args(argv)
    chunks = jfk_chunks()
    forms = ("chunk log", "a file per chunk")
    figures: dict[str, list[tuple[float, float, float, str]]] = {f: [] for f in forms}
    for i in range(args.repeat):
        for form in forms:
            figures[form].append(one_form(form, args.dir / form.replace(" ", "_"), chunks))
        print(f"repeat {i + 1}: " + ", ".join(f"{f} {figures[f][-1][0]:.3f} s" for f in forms))
    size = sum(map(len, chunks)) / 2**20
    print(f"\n{len(chunks)} chunks, {size:.1f} MiB, median of {args.repeat} (range):\n")
    print("| form | staging wall s | staging CPU s | publish wall s |")
    print("|---|---|---|---|")
    for form in forms:
        wall, cpu, published, _ = zip(*figures[form], strict=True)
        print(f"| {form} | {spread(wall)} | {spread(cpu)} | {spread(published)} |")
    digests = {d for f in forms for *_, d in figures[f]}
    print(f"\npublished files: {'the same bytes' if len(digests) == 1 else 'DIFFER'}")


if __name__ == "__main__":
    main()
