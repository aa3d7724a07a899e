"""The drills' and benchmarks' workload: a seeded customers CSV of any size and the import
pipeline that reads, normalises and exports it."""

from __future__ import annotations

import csv
import random
from pathlib import Path

CSV_SEED = 20261129
COLUMNS = {"id": "int", "amount": "int", "signup": "date"}  # declared; the rest is inferred
_FIRST = ["Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivan", "Jo"]
_LAST = ["Smith", "Ivanova", "Okafor", "Novak", "Garcia", "Kowalski", "Tanaka", "Berg"]
_CITY = ["Lisbon", "Riga", "Oslo", "Porto", "Tallinn", "Krakow", "Ghent", "Turku", "Bern"]


def generate_csv(path: Path, records: int, *, seed: int = CSV_SEED) -> dict[str, int]:
    """Write `records` seeded customer rows (`id,name,email,amount,signup,city,note`, ~120
    bytes each): ~2% with a quoted multi-line note, ~1% with doubled quotes, names with
    extra white space. The same seed and size always give the same bytes."""
    rng = random.Random(seed)
    multiline = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["id", "name", "email", "amount", "signup", "city", "note"])
        for i in range(1, records + 1):
            first, last = rng.choice(_FIRST), rng.choice(_LAST)
            name = f"{first} {last}"
            if rng.random() < 0.3:
                name = f"  {first}   {last}\t"  # for normalize_whitespace to collapse
            roll = rng.random()
            note = f"customer since {rng.randint(2001, 2025)}, tier {rng.choice('ABCD')}, ref "
            note += str(rng.randint(10_000_000, 99_999_999))
            if roll < 0.02:
                note = f"first line of note {i}\nsecond line, with a comma\n  third  line"
                multiline += 1
            elif roll < 0.03:
                note = f'said "hello" and "bye" on visit {i}'
            signup = f"{rng.randint(2001, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            email = f"{first.lower()}.{last.lower()}{i}@example.org"
            amount = rng.randint(-5000, 2_000_000)
            out.writerow([i, name, email, amount, signup, rng.choice(_CITY), note])
    return {"records": records, "multiline": multiline, "bytes": path.stat().st_size}


def import_plan(*, jsonl: bool = True, path: str = "customers.csv") -> dict:
    """ingest `path` -> normalize_whitespace -> export to `sandbox.customers` (key id) [and to
    a JSONL file]: the pipeline of import-100k, crash-after-export, the compose drill and the
    benchmark."""
    steps = [
        {"name": "ingest", "type": "ingest",
         "config": {"source": "file", "path": path, "columns": COLUMNS}},
        {"name": "normalize", "type": "transform", "depends_on": ["ingest"],
         "config": {"op": "normalize_whitespace", "columns": ["name", "note"]}},
        {"name": "to_table", "type": "export", "depends_on": ["normalize"],
         "config": {"target": "table", "table": "customers", "key": "id"}},
        {"name": "to_file", "type": "export", "depends_on": ["normalize"],
         "config": {"target": "file", "path": "customers.jsonl", "format": "jsonl"}},
    ]  # fmt: skip
    return {"on_failure": "stop_dependents", "steps": steps if jsonl else steps[:3]}
