"""Step names shortened for narrow places (a graph box, an 80-column table) so that two
names never shorten to the same text: the ellipsis goes in the middle, and where the usual
cut collides it moves until every label differs."""

from __future__ import annotations

from collections.abc import Iterable

ELLIPSIS = "\u2026"


def middle_cut(name: str, limit: int, tail: int | None = None) -> str:
    """`name` within `limit` characters: its head, an ellipsis and its last `tail`
    characters (by default a third of the room: names usually differ at their end)."""
    if len(name) <= limit:
        return name
    if limit < 3:
        return name[:limit]
    room = limit - 1
    keep_tail = room // 3 if tail is None else max(0, min(tail, room))
    head = room - keep_tail
    return name[:head] + ELLIPSIS + (name[len(name) - keep_tail :] if keep_tail else "")


def distinct_labels(names: Iterable[str], limit: int) -> dict[str, str]:
    """A label within `limit` characters for each distinct name, no two alike: names that
    fit stay whole; a long one is cut in the middle, and where cuts collide each colliding
    name gets the split (more tail, then more head) that sets it apart; a last resort
    numbers them."""
    unique = list(dict.fromkeys(names))
    labels = {n: middle_cut(n, limit) for n in unique}
    room = max(limit - 1, 0)
    for _ in range(len(unique)):
        seen: dict[str, list[str]] = {}
        for n in unique:
            seen.setdefault(labels[n], []).append(n)
        clashes = [group for group in seen.values() if len(group) > 1]
        if not clashes:
            return labels
        for group in clashes:
            taken = {labels[n] for n in unique if n not in group}
            for tail in [*range(room // 3 + 1, room + 1), *range(room // 3 - 1, -1, -1)]:
                tried = {n: middle_cut(n, limit, tail) for n in group}
                if len(set(tried.values())) == len(group) and not taken & set(tried.values()):
                    labels.update(tried)
                    break
            else:
                for i, n in enumerate(group, 1):
                    mark = f"{ELLIPSIS}{i}"
                    labels[n] = n[: max(limit - len(mark), 0)] + mark
    return labels
