"""Digests of a step's records: an order-sensitive SHA-256 chain, computed batch by batch.

Encoding (version 1; change `DIGEST_SEED` if it ever changes):

- `canonical(record)` = `json.dumps(record, sort_keys=True, separators=(",", ":"),
  ensure_ascii=False)` encoded as UTF-8 (lone surrogates, which only a JSON `\\ud800`
  escape can produce, are kept with `surrogatepass` rather than failing). Records hold
  only str, int and None (dates are ISO strings), whose JSON text is the same on every
  Python version; keys are sorted so the digest does not depend on how the dict was built
  (column order is recorded in the step's `columns` instead).
- `d_0 = DIGEST_SEED = sha256(b"etl-digest-v1").hexdigest()`, and
  `d_i = sha256(bytes.fromhex(d_{i-1}) + canonical(record_i))`, as lowercase hex.

The digest of a step is `d_n` over its records in order. As each step needs only the
previous digest, `chain_digest(chain_digest(d, a), b) == chain_digest(d, a + b)`: the value
is the same however the records are split into batches, and it can go in a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DIGEST_SEED", "canonical_record", "chain_bytes", "chain_digest"]

DIGEST_SEED = hashlib.sha256(b"etl-digest-v1").hexdigest()
# One encoder for every record: json.dumps with options builds a new one per call.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical_record(record: Mapping[str, Any]) -> bytes:
    """The canonical bytes of one record (see the module docstring)."""
    return _encode(record).encode("utf-8", "surrogatepass")


def chain_digest(prev_hex: str, records: Iterable[Mapping[str, Any]]) -> str:
    """Extend the digest `prev_hex` (start from `DIGEST_SEED`) with `records`, in order."""
    digest = bytes.fromhex(prev_hex)
    sha256 = hashlib.sha256
    for record in records:
        digest = sha256(digest + _encode(record).encode("utf-8", "surrogatepass")).digest()
    return digest.hex()


def chain_bytes(prev_hex: str, data: bytes) -> str:
    """Extend the digest `prev_hex` with a block of raw input bytes:
    `sha256(bytes.fromhex(prev_hex) + data)`. Used for the raw bytes of a file, block by
    block at batch boundaries (which are deterministic for a given file)."""
    return hashlib.sha256(bytes.fromhex(prev_hex) + data).hexdigest()
