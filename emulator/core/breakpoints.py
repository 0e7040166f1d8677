"""Breakpoints: a Unicorn code hook on each address, so a run pays nothing for them
until one is hit (Unicorn calls a code hook only at its own address).

A breakpoint may carry a condition, ``condition(cycle, number)`` of the instruction
about to execute (the cycle it starts at, its instruction number counted from load):
the run stops only when it returns true. It costs a Python call per execution of its
address, nothing elsewhere; fault campaigns use it to stop before the n-th
instruction (docs/faults.md).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from unicorn import UC_HOOK_CODE, Uc
from unicorn.unicorn_py3.unicorn import HOOK_CODE_CFUNC, uccallback

from pkasim.core.cpu import Core

Condition = Callable[[int, int], bool]


class Breakpoints:
    """Addresses where ``run()`` stops before the instruction executes."""

    def __init__(self, core: Core, on_hit: Callable[[int], None],
                 position: Callable[[int], tuple[int, int]] | None = None) -> None:
        self.core = core
        self.on_hit = on_hit
        self.position = position  # address -> (cycle, instruction number) of the instruction there
        self.addresses: set[int] = set()
        self.skip: int | None = None  # the one to step over when resuming from it
        self.conditions: dict[int, Condition] = {}
        self._hooks: dict[int, ctypes.c_size_t] = {}
        # One ctypes callback for every breakpoint, made with the machine: each add is
        # then a plain uc_hook_add (the binding's hook_add builds a callback per call,
        # about 0.15 ms the first time in a process, inside the run it is part of).
        self._py_hook = uccallback(core.uc, HOOK_CODE_CFUNC)(
            lambda uc, address, size, _key: self._hook(uc, address, size, None))

    def add(self, addr: int, condition: Condition | None = None) -> None:
        addr &= ~1
        if condition is not None:
            self.conditions[addr] = condition
        else:
            self.conditions.pop(addr, None)
        if addr in self._hooks:
            return
        self.addresses.add(addr)
        self._hooks[addr] = self.core.add_native_hook(UC_HOOK_CODE, self._py_hook, addr, addr, ctypes.c_void_p(0))
        self.core.uc.ctl_remove_cache(addr, addr + 2)

    def remove(self, addr: int) -> None:
        addr &= ~1
        self.addresses.discard(addr)
        self.conditions.pop(addr, None)
        handle = self._hooks.pop(addr, None)
        if handle is not None:
            self.core.remove_native_hook(handle)
            self.core.uc.ctl_remove_cache(addr, addr + 2)

    def stops_at(self, address: int) -> bool:
        """Whether the run stops before the instruction at ``address``: a breakpoint
        is there, it is not the one being stepped over (that pass is used up), and
        its condition, if any, holds."""
        if address == self.skip:
            self.skip = None
            return False
        if address not in self.addresses:
            return False
        condition = self.conditions.get(address)
        return condition is None or self.position is None or bool(condition(*self.position(address)))

    def _hook(self, uc: Uc, address: int, size: int, _: object) -> None:
        if self.stops_at(address):
            self.on_hit(address)
