"""The sweep's share of the metrics: fold the deltas that state changes appended
(`metric_deltas`, written by triggers of migration 0009) into `metric_totals`, so that a
scrape reads a table the size of the label sets, not of the history; and forget executors
gone for a day."""

from __future__ import annotations

from actors.sql import QUERIES


def fold_metric_deltas(conn) -> int:
    """Fold every committed delta into the totals in one transaction (and forget executors
    gone for a day); returns how many totals changed."""
    try:
        with conn.cursor() as cur:
            cur.execute(QUERIES["lock_metric_totals"])
            cur.execute(QUERIES["fold_metric_deltas"])
            folded = cur.rowcount
            cur.execute(QUERIES["forget_gone_executors"])
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return folded
