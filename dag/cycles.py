"""Cycle finding in a step dependency graph, for the plan's validation errors: one
deterministic cycle per strongly connected component (Tarjan's algorithm, iterative)."""

from __future__ import annotations

from collections.abc import Mapping


def find_cycles(edges: Mapping[str, list[str]]) -> list[list[str]]:
    """One cycle per strongly connected component, as [a, b, ..., a] along `edges`.

    Each cycle starts at the component's first node in `edges` order and is the shortest
    one back to it, so the report is deterministic. Self-edges are the caller's business.
    """
    position = {name: i for i, name in enumerate(edges)}
    cycles = []
    for component in _strongly_connected(edges):
        if len(component) < 2:
            continue
        start = min(component, key=position.__getitem__)
        members = set(component)
        parent: dict[str, str] = {start: start}
        queue = [start]
        for node in queue:
            nxt = next((d for d in edges[node] if d == start), None)
            if nxt is not None:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                cycles.append([*reversed(path), start])
                break
            for dep in edges[node]:
                if dep in members and dep not in parent:
                    parent[dep] = node
                    queue.append(dep)
    cycles.sort(key=lambda c: position[c[0]])
    return cycles


def _strongly_connected(edges: Mapping[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so a long chain cannot exhaust the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in edges:
        if root in index:
            continue
        visit(root)
        work = [(root, iter(edges[root]))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    visit(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def cycle_message(cycle: list[str]) -> str:
    """How a validation error names `cycle`: `cycle: a -> b -> a` ("->" reads "depends on")."""
    return "cycle: " + " -> ".join(cycle)
