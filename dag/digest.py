"""Digests of a step's records: an order-sensitive SHA-256 chain, computed batch by batch
over bytes the step produces anyway.

Encoding (version 2; change `DIGEST_SEED` if it ever changes):

- a batch of records is encoded by `encode_rows(records, names)`: the compact JSON list of
  its rows, each row the list of the record's values in column order
  (`json.dumps(rows, separators=(",", ":"), ensure_ascii=False)`, UTF-8, lone surrogates
  kept with `surrogatepass`). Records hold only str, int and None (dates are ISO strings),
  whose JSON text is the same on every Python version. It is the form a step's committed
  output is stored in (`actors/outputs.py`), so a step that stores its output digests the
  very bytes it stores, and a step that passes its input on unchanged digests the bytes it
  read, without encoding anything again;
- `d_0 = DIGEST_SEED = sha256(b"etl-digest-v2").hexdigest()`, and for each non-empty batch
  `d_i = sha256(bytes.fromhex(d_{i-1}) + encode_names(names) + encode_rows(batch_i))`, as
  lowercase hex; an empty batch leaves the digest as it is (no output batch is stored for
  it either).

The digest of a step is `d_n` over its output batches in order. It depends on where the
batches end, which is deterministic: a step's output batch `i` is what its input batch `i`
(500 records of its input, or of a stored upstream batch) gives. It also depends on the
column names and their order, which are part of the encoded header. Version 1 chained one
JSON encode per record (`sort_keys`), three times per record and step: a third of the
100,000-record benchmark's step time.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import orjson

from dag.columns import column_values, unbuilt

__all__ = ["DIGEST_SEED", "chain_bytes", "chain_rows", "encode_rows"]

DIGEST_SEED = hashlib.sha256(b"etl-digest-v2").hexdigest()
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode_rows(records: Sequence[Mapping[str, Any]], names: Sequence[str]) -> bytes:
    """The canonical bytes of a batch: the JSON list of rows, values in `names` order (a
    missing column is null). Rows are picked with one `itemgetter` call per record (tuples
    encode as JSON lists), ~30 % faster than a list per record; the rows of a `Columns` not
    built are its columns zipped (no record built)."""
    if unbuilt(records) is not None:
        if not names:
            return _dumps_compact([()] * len(records))
        return _dumps_compact(list(zip(*column_values(records, names), strict=True)))
    if len(names) > 1:
        pick = itemgetter(*names)
        try:
            rows: list = [pick(r) for r in records]
        except KeyError:  # a record without some column: null there
            rows = [[r.get(n) for n in names] for r in records]
    else:
        rows = [[r.get(n) for n in names] for r in records]
    return _dumps_compact(rows)


def _dumps_compact(value: Any) -> bytes:
    """`value` (lists, tuples, dicts with str keys, str, int, None) as the compact JSON
    of `json.dumps(value, separators=(",", ":"), ensure_ascii=False)` in UTF-8: by orjson,
    which writes exactly those bytes several times faster; by the standard encoder (lone
    surrogates kept with `surrogatepass`) for what orjson refuses: a lone surrogate, an int
    beyond 64 bits."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return _encode(value).encode("utf-8", "surrogatepass")


def encode_names(names: Sequence[str]) -> bytes:
    """The header of a batch in the chain: the JSON list of the column names, a newline."""
    return _encoded_names(tuple(names))


@functools.lru_cache(maxsize=256)
def _encoded_names(names: tuple[str, ...]) -> bytes:
    # the same few headers for every batch of a step: encoded once
    return _encode(list(names)).encode("utf-8", "surrogatepass") + b"\n"


def chain_rows(prev_hex: str, names: Sequence[str], rows: bytes | None) -> str:
    """Extend the digest `prev_hex` (start from `DIGEST_SEED`) with one batch given as its
    `encode_rows` bytes; `None` or an empty batch (`b"[]"`) leaves it unchanged."""
    if rows is None or rows == b"[]":
        return prev_hex
    digest = hashlib.sha256(bytes.fromhex(prev_hex))
    digest.update(encode_names(names))
    digest.update(rows)  # fed apart: the batch's bytes are not copied into one more buffer
    return digest.hexdigest()


def chain_bytes(prev_hex: str, data: bytes) -> str:
    """Extend the digest `prev_hex` with a block of raw input bytes:
    `sha256(bytes.fromhex(prev_hex) + data)`. Used for the raw bytes of a file, block by
    block at batch boundaries (which are deterministic for a given file)."""
    return hashlib.sha256(bytes.fromhex(prev_hex) + data).hexdigest()
