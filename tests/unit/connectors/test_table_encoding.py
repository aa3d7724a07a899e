"""The table export's batch encoding, without a database: byte for byte what `csv.writer`
(QUOTE_NONNUMERIC, null as a bare `nan`) writes, the CSV `copy_batch_typed` and
`copy_staging` read. Property tests use hypothesis with `max_examples=300`."""

from __future__ import annotations

import csv
import io
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import TableExport

_TEXTS = st.one_of(
    st.none(),
    st.text(),
    st.sampled_from(["", '"', '""', "nan", "\\N", "\\.", 'a,"b"\nc', "\r\n", ",", "nul\x00"]),
)
_INTS = st.one_of(st.none(), st.integers(-(2**70), 2**70))
_ANY = st.one_of(_TEXTS, _INTS, st.booleans(), st.floats(), st.lists(st.integers(), max_size=2))


class _Conn:
    autocommit = False


def _csv_writer_text(columns: list[str], records: list[dict], keys: list[str], seq) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    tail = [] if seq is None else [seq]
    for record, key in zip(records, keys, strict=True):
        values = [record.get(c) for c in columns]
        writer.writerow([*[float("nan") if v is None else v for v in values], key, *tail])
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_batch_encoding_is_what_csv_writer_writes(data):
    kinds = data.draw(st.lists(st.sampled_from([_TEXTS, _INTS, _ANY]), min_size=1, max_size=3))
    columns = {f"c{i}": "string" for i in range(len(kinds))}
    values = {name: kind for name, kind in zip(columns, kinds, strict=True)}
    records = data.draw(st.lists(st.fixed_dictionaries(values), max_size=6))
    seq = data.draw(st.one_of(st.none(), st.integers(0, 99)))
    export = TableExport(_Conn(), "t", uuid.uuid4(), "to_table", columns, None)
    buf, keys = export._encode_batch(records, 7, seq)
    assert keys == [str(7 + i) for i in range(len(records))]
    assert buf.getvalue() == _csv_writer_text(list(columns), records, keys, seq)
