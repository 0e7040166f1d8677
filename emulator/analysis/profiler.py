"""The cycle profiler: per function calls, instructions, inclusive and exclusive
cycles, cycles spent waiting, and PKA busy time.

Its data is a calling-context tree: one node per distinct call path (exceptions
appear as an ``[exception NAME]`` node above their handler). Every event closes an
interval of model time that goes, whole, to the node on top of the call stack, so
the exclusive cycles of all nodes add up exactly to the cycles observed (the run's
total when the profiler was attached before the run). The per-function table, the
folded stacks and ``pkasim profile``'s JSON (docs/json-schema.md) are views of the
tree. ``Profiler`` reads the tree the native observer keeps (observe.c), at no Python
cost per event; ``StreamProfiler`` builds the same tree in Python from the events.

Waiting (docs/traces.md): cycles asleep in WFI/WFE go to the function that slept;
a function that reads the PKA's SR while it is busy is taken as spinning on it until
that operation finishes. Both count in its exclusive cycles and, as well, in its
``wait_cycles``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pkasim.core.observe import Event, Kind, ObservedImage, Observer
from pkasim.peripherals.nvic import exception_name

PROFILE_SCHEMA = "pkasim.profile/1"
ROOT = "[root]"  # time observed with no frame on the stack (none in a run from reset)
WAITING = "[waiting]"  # the folded stacks' leaf for a function's wait cycles


class Node:
    """One call path. ``fn`` is a function index, or -exc for an exception node."""

    __slots__ = ("parent", "fn", "children", "calls", "cycles", "insns", "wait", "pka_busy", "pka_ops")

    def __init__(self, parent: Node | None, fn: int) -> None:
        self.parent = parent
        self.fn = fn
        self.children: dict[int, Node] = {}
        self.calls = 0
        self.cycles = 0  # exclusive
        self.insns = 0
        self.wait = 0
        self.pka_busy = 0  # busy cycles of the PKA operations this path started
        self.pka_ops = 0

    def child(self, fn: int) -> Node:
        node = self.children.get(fn)
        if node is None:
            node = self.children[fn] = Node(self, fn)
        return node


@dataclass
class FunctionRow:
    name: str
    address: int
    calls: int
    instructions: int
    inclusive_cycles: int
    exclusive_cycles: int
    wait_cycles: int
    pka_busy_cycles: int
    pka_busy_inclusive_cycles: int
    pka_operations: int

    def to_json(self) -> dict:
        return dict(self.__dict__)


class CallTree:
    """A calling-context tree and its views: the per-function table, folded stacks."""

    def __init__(self) -> None:
        self.info: ObservedImage | None = None
        self.root = Node(None, 0)

    def start(self, info: ObservedImage) -> None:
        self.info = info

    # ------------------------------------------------------------------ views
    @property
    def total_cycles(self) -> int:
        """Cycles observed: the sum of every node's exclusive cycles."""
        return sum(node.cycles for node in self._nodes())

    @property
    def total_instructions(self) -> int:
        return sum(node.insns for node in self._nodes())

    def name(self, node: Node) -> str:
        if node is self.root:
            return ROOT
        if node.fn < 0:
            return f"[exception {exception_name(-node.fn)}]"
        return self.info.functions[node.fn] if self.info else str(node.fn)

    def _nodes(self) -> list[Node]:
        """Every node, parents before children, in a fixed order."""
        out, todo = [], [self.root]
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(node.children[k] for k in sorted(node.children, reverse=True))
        return out

    def rows(self) -> list[FunctionRow]:
        """One row per function that ran, sorted by exclusive cycles (then name)."""
        nodes = self._nodes()
        total: dict[int, int] = {}
        busy_total: dict[int, int] = {}
        for node in reversed(nodes):  # children first
            total[id(node)] = node.cycles + sum(total[id(c)] for c in node.children.values())
            busy_total[id(node)] = node.pka_busy + sum(busy_total[id(c)] for c in node.children.values())
        rows: dict[int, FunctionRow] = {}
        # inclusive: subtrees whose root has no ancestor running the same function
        todo: list[tuple[Node, frozenset[int]]] = [(self.root, frozenset())]
        while todo:
            node, above = todo.pop()
            key = node.fn
            if node is not self.root and key >= 0:
                row = rows.get(key)
                if row is None:
                    addr = self.info.addresses[key] if self.info else 0
                    row = rows[key] = FunctionRow(self.name(node), addr, 0, 0, 0, 0, 0, 0, 0, 0)
                row.calls += node.calls
                row.instructions += node.insns
                row.exclusive_cycles += node.cycles
                row.wait_cycles += node.wait
                row.pka_busy_cycles += node.pka_busy
                row.pka_operations += node.pka_ops
                if key not in above:
                    row.inclusive_cycles += total[id(node)]
                    row.pka_busy_inclusive_cycles += busy_total[id(node)]
                    above = above | {key}
            for child in node.children.values():
                todo.append((child, above))
        if self.root.cycles or self.root.insns:
            rows[-1 << 40] = FunctionRow(ROOT, 0, 0, self.root.insns, self.root.cycles, self.root.cycles,
                                         self.root.wait, self.root.pka_busy, self.root.pka_busy, self.root.pka_ops)
        ran = (r for r in rows.values() if r.calls or r.exclusive_cycles or r.inclusive_cycles)
        return sorted(ran, key=lambda r: (-r.exclusive_cycles, r.name))

    def folded(self) -> list[tuple[str, int]]:
        """Folded stacks (``a;b;c weight``), weighted by exclusive cycles; a function's
        wait cycles stand as a ``[waiting]`` frame above it. Weights sum to the total."""
        out: dict[str, int] = {}
        paths: dict[int, str] = {}
        for node in self._nodes():
            if node is self.root:
                paths[id(node)] = ""
                here = ROOT
            else:
                parent = paths[id(node.parent)]
                here = paths[id(node)] = f"{parent};{self.name(node)}" if parent else self.name(node)
            own = node.cycles - node.wait
            if own:
                out[here] = out.get(here, 0) + own
            if node.wait:
                key = f"{here};{WAITING}"
                out[key] = out.get(key, 0) + node.wait
        return sorted(out.items())


class StreamProfiler(CallTree, Observer):
    """The same tree built in Python from the event stream: the reference the native
    tree is tested against, and an example of an observer of every event."""

    def __init__(self) -> None:
        super().__init__()
        self._stack: list[Node] = [self.root]
        self._last_cycle: int | None = None
        self._last_insns = 0
        self.first_cycle: int | None = None
        self.first_insns = 0
        self._spin: Node | None = None  # the node spinning on a busy PKA
        self.pka_by_op: dict[int, int] = {}

    # ------------------------------------------------------------------ the stream
    def events(self, batch: Sequence[Event]) -> None:
        stack = self._stack
        top = stack[-1]
        last_c, last_i = self._last_cycle, self._last_insns
        if last_c is None and batch:
            last_c, last_i = self.first_cycle, self.first_insns = batch[0].cycle, batch[0].insns
        spin = self._spin
        for cycle, insns, b, kind, a, _fn, _depth in batch:
            dc = cycle - last_c
            if dc:
                top.cycles += dc
                if spin is top:
                    top.wait += dc
                last_c = cycle
            if insns != last_i:
                top.insns += insns - last_i
                last_i = insns
            if kind == Kind.CALL:
                top = top.child(a)
                top.calls += 1
                stack.append(top)
            elif kind == Kind.RETURN:
                if len(stack) > 1:
                    stack.pop()
                    top = stack[-1]
            elif kind == Kind.TAILCALL:
                if len(stack) > 1:
                    stack.pop()
                top = stack[-1].child(a)
                top.calls += 1
                stack.append(top)
            elif kind == Kind.EXC_ENTRY:
                exc = top.child(-a)
                exc.calls += 1
                stack.append(exc)
                top = exc.child(_fn)
                top.calls += 1
                stack.append(top)
            elif kind == Kind.EXC_RETURN:
                while len(stack) > 1:
                    node = stack.pop()
                    if node.fn < 0:
                        break
                top = stack[-1]
            elif kind == Kind.SLEEP or kind == Kind.SPIN:
                top.cycles += b
                top.wait += b
                last_c = cycle + b
            elif kind == Kind.PKA_START:
                top.pka_busy += b
                top.pka_ops += 1
                self.pka_by_op[a & 0xFF] = self.pka_by_op.get(a & 0xFF, 0) + 1
            elif kind == Kind.PKA_POLL:
                if spin is None:
                    spin = top
            elif kind == Kind.PKA_FINISH:
                spin = None
            elif kind == Kind.RESET:
                del stack[1:]
                top = self.root
        self._last_cycle, self._last_insns, self._spin = last_c, last_i, spin


class Profiler(CallTree, Observer):
    """Attach with ``machine.observe(Profiler())``; read ``rows()``, ``folded()``.

    The tree is the native observer's (observe.c keeps it at no Python cost per
    event): this reads it each time a run returns, less what it held when the
    profiler was attached, so a profiler attached mid-run sees the rest exactly.
    """

    wants_events = False

    def __init__(self) -> None:
        super().__init__()
        self._base: dict[int, tuple[int, ...]] = {}

    def start(self, info: ObservedImage) -> None:
        super().start(info)
        self._base = {i: row[2:] for i, row in enumerate(self.observation.call_tree())} if self.observation else {}
        self.root = Node(None, 0)

    def stopped(self) -> None:
        """Rebuild the tree from the native one (parents come before children)."""
        nodes: list[Node] = []
        for i, (fn, parent, *counts) in enumerate(self.observation.call_tree()):
            base = self._base.get(i, (0,) * 6)
            node = self.root if i == 0 else Node(nodes[parent], fn)
            if i:
                nodes[parent].children[fn] = node
            node.calls, node.cycles, node.insns, node.wait, node.pka_busy, node.pka_ops = (
                c - b for c, b in zip(counts, base))
            nodes.append(node)
