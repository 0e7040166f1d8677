"""Breakpoints: a Unicorn code hook on each address, so a run pays nothing for them
until one is hit (Unicorn calls a code hook only at its own address)."""

from __future__ import annotations

from collections.abc import Callable

from unicorn import UC_HOOK_CODE, Uc

from pkasim.core.cpu import Core


class Breakpoints:
    """Addresses where ``run()`` stops before the instruction executes."""

    def __init__(self, core: Core, on_hit: Callable[[int], None]) -> None:
        self.core = core
        self.on_hit = on_hit
        self.addresses: set[int] = set()
        self.skip: int | None = None  # the one to step over when resuming from it
        self._hooks: dict[int, int] = {}

    def add(self, addr: int) -> None:
        addr &= ~1
        if addr in self._hooks:
            return
        self.addresses.add(addr)
        self._hooks[addr] = self.core.uc.hook_add(UC_HOOK_CODE, self._hook, begin=addr, end=addr)
        self.core.uc.ctl_remove_cache(addr, addr + 2)

    def remove(self, addr: int) -> None:
        addr &= ~1
        self.addresses.discard(addr)
        handle = self._hooks.pop(addr, None)
        if handle is not None:
            self.core.uc.hook_del(handle)
            self.core.uc.ctl_remove_cache(addr, addr + 2)

    def _hook(self, uc: Uc, address: int, size: int, _: object) -> None:
        if address == self.skip:
            self.skip = None
            return
        self.on_hit(address)
