"""A table export's batch as a statement staged inside another transaction on the sandbox
database (a batch's commit, `actors.committer`), a column at a time.

A batch goes as one text per column (`split_columns`): its values joined by `FIELD_SEP`, a
null written `NULL_MARK`, which the server splits back with `string_to_array` and casts a
whole array at a time (`stage_columns`), and its record keys as one more such text. That is
the cheapest form found for the server to read (`docs/decisions.md`, "Staged rows a column
at a time"): `json_to_recordset` builds a lookup per record and field. A batch that text
cannot carry exactly (a value holding either separator, a value that is not text or an int
in its column, one record alone) goes as the JSON array of its records (`stage_json`), and
one that JSON cannot carry either (a NUL, a lone surrogate, an int beyond 64 bits) is for
`TableExport.write_batch`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from psycopg2 import sql

from connectors.sql import QUERIES
from dag.columns import INT_OR_NULL, TEXT_OR_NULL, column_values, record_dicts

FIELD_SEP = "\x1f"  # ASCII unit separator: between two values of a column
NULL_MARK = "\x1e"  # ASCII record separator: a null value
# Server types of the arrays the texts are split into (the staging table's columns).
_ARRAYS = {
    "int": "unnest({}::bigint[])",
    "string": "unnest(string_to_array({}, chr(31), chr(30)))",
    "date": "unnest(string_to_array({}, chr(31), chr(30))::date[])",
}


class CommitStaging:
    """The in-commit statements of one table export's batches: composed once, on first use,
    for `staging` (its table) with the export's `columns` (name -> type)."""

    def __init__(self, conn: Any, staging: sql.Identifier, columns: Mapping[str, str],
                 batch_seq: sql.Identifier):  # fmt: skip
        self._conn = conn
        self._staging = staging
        self._columns = dict(columns)
        self._batch_seq = batch_seq
        self._queries: dict[str, str] = {}

    def statement(
        self, seq: int, records: Sequence[Mapping[str, Any]], keys: list[str]
    ) -> tuple[str, dict[str, Any]] | None:
        """Batch `seq` (its `records` and their record `keys`, in order) as a statement and
        its parameters, or None when neither form carries it exactly."""
        texts = split_columns(self._columns, records, keys)
        if texts is not None:
            params = {f"c{i}": text for i, text in enumerate(texts)}
            return self._query("stage_columns"), {**params, "batch_seq": seq}
        payload = json_records(records)
        if payload is None:
            return None
        keys_json = orjson.dumps(keys).decode()
        params = {"batch_seq": seq, "records": payload, "keys": keys_json}
        return self._query("stage_json"), params

    def _query(self, name: str) -> str:
        query = self._queries.get(name)
        if query is None:  # the same text for every batch: composed once
            names = [sql.Identifier(c) for c in self._columns]
            query = (
                sql.SQL(QUERIES[name])
                .format(
                    staging=self._staging,
                    columns=sql.SQL(", ").join(names),
                    batch_seq=self._batch_seq,
                    column_defs=sql.SQL(", ").join(
                        sql.SQL("{} {}").format(n, sql.SQL(_SERVER_TYPES[t]))
                        for n, t in zip(names, self._columns.values(), strict=True)
                    ),
                    arrays=sql.SQL(", ").join(
                        sql.SQL(_ARRAYS[t]).format(sql.Placeholder(f"c{i}"))
                        for i, t in enumerate([*self._columns.values(), "string"])
                    ),
                )
                .as_string(self._conn)
            )
            self._queries[name] = query
        return query


def json_records(records: Sequence[Mapping[str, Any]]) -> str | None:
    """The JSON array of a batch's records for `stage_json` (a `dag.Columns` too: its
    dicts built for this and dropped), or None when JSON cannot carry it as PostgreSQL
    reads it: a NUL, a lone surrogate, an int beyond 64 bits."""
    try:
        payload = orjson.dumps(record_dicts(records))
    except TypeError:  # orjson's error for what it cannot encode exactly
        return None
    return None if b"\\u0000" in payload else payload.decode()


_SERVER_TYPES = {"int": "bigint", "string": "text", "date": "date"}


def split_columns(
    columns: Mapping[str, str], records: Sequence[Mapping[str, Any]], keys: list[str]
) -> list[str] | None:
    """Each of `columns` of a batch (name -> type), then its record `keys`, as one text:
    the values joined by `FIELD_SEP`, a null as `NULL_MARK`, built by C-level joins over a
    whole column. None when that would not split back into exactly these values: fewer
    than two records (one empty value is an empty text, which splits into no element), a
    value holding a separator or a NUL, a value other than text in a text or date column
    or other than an int in an int column, an int JSON could not carry, a lone surrogate."""
    n = len(records)
    if n < 2:
        return None
    texts = []
    for values, kind in zip(column_values(records, list(columns)), columns.values(), strict=True):
        text = _split_ints(values) if kind == "int" else _split_texts(values)
        if text is None:
            return None
        texts.append(text)
    keys_text = FIELD_SEP.join(keys)
    if keys_text.count(FIELD_SEP) != n - 1 or NULL_MARK in keys_text or "\x00" in keys_text:
        return None
    texts.append(keys_text)
    for text in texts:
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for the server
                return None
    return texts


def _split_ints(values: list[Any]) -> str | None:
    """An int column as the text of a PostgreSQL array (`{1,null,3}`), written by orjson."""
    if not set(map(type, values)) <= INT_OR_NULL:
        return None
    try:
        text = orjson.dumps(values).decode()
    except TypeError:  # an int beyond 64 bits, as the JSON path refuses it
        return None
    return "{" + text[1:-1] + "}"


def _split_texts(values: list[Any]) -> str | None:
    kinds = set(map(type, values))
    if not kinds <= TEXT_OR_NULL:
        return None
    nulls = values.count(None) if type(None) in kinds else 0
    text = FIELD_SEP.join([NULL_MARK if v is None else v for v in values] if nulls else values)
    if text.count(FIELD_SEP) != len(values) - 1 or text.count(NULL_MARK) != nulls or "\x00" in text:
        return None
    return text
