"""The domain's named SQL is one dict: every block of every file, each name once."""

from __future__ import annotations

from pathlib import Path

import pytest

import service.domain.sql as sql
from ddl import load_queries

SQL_DIR = Path(sql.__file__).parent


def test_every_file_is_loaded_and_every_name_is_called_the_same_way() -> None:
    assert sorted(p.stem for p in SQL_DIR.glob("*.sql")) == sorted(sql.FILES)
    names = [n for f in sql.FILES for n in load_queries(SQL_DIR / f"{f}.sql")]
    assert sorted(names) == sorted(sql.QUERIES)  # so no name is in two files


def test_a_name_in_two_files_is_refused(tmp_path: Path) -> None:
    for name in ("queries", "listing"):
        (tmp_path / f"{name}.sql").write_text("-- same --\n-- Purpose.\nSELECT 1;\n")
    with pytest.raises(ValueError, match="'same' is also defined in another file"):
        sql.load_all(tmp_path, ("queries", "listing"))
