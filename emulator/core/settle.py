"""Committing the block a run stopped in: the cycles of exactly the instructions that
executed (docs/cycle-model.md, "How the count is kept", step 3).

The native hook commits a block when the next one starts; when the engine stops
inside a block (a fault, a breakpoint, semihosting, a single step), the count is
settled here.
"""

from __future__ import annotations

import ctypes

from unicorn import arm_const as A

from pkasim.core.cpu import Core
from pkasim.core.cycles import COND_PENALTY, F_COND, F_CONDNEXT


class Settler:
    """Settles blocks of one core."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def settle(self, pc: int) -> None:
        """Commit the block that was executing when the run stopped with PC at ``pc``."""
        s = self.core.state
        if not s.cur_valid:
            return
        start, end = s.cur_start, s.cur_end
        if start <= pc < end:
            cost, insns = self.cost_before(pc)
            cost += self._entry_fetch(start, end)
            s.prev_valid, s.prev_end, s.prev_flags = 1, pc, 0
        else:
            cost, insns = s.cur_cost, s.cur_insns
            # (counted mode: the engine took the not-taken cycles off on the way out)
            if not s.counted and (s.cur_flags & F_COND) and pc == end and not self._cond_taken_to_next(s.cur_flags):
                cost -= COND_PENALTY
            s.prev_valid, s.prev_end, s.prev_flags = 1, end, s.cur_flags
        s.cycles += cost
        s.insns += insns
        s.blocks += 1
        self.core.drop_block()

    def _entry_fetch(self, start: int, end: int) -> int:
        """The flash wait states the block paid on entry (the fetch rule: a block starting
        in the upper half of a flash word, not reached sequentially, fetches that word):
        part of its recorded cost, not of its instructions' costs."""
        s = self.core.state
        if not (s.fetch_ws and start & 2 and s.flash_base <= start < s.flash_end):
            return 0
        whole, _ = self.cost_before(end)
        return s.fetch_ws if s.cur_cost - whole == s.fetch_ws else 0

    def _cond_taken_to_next(self, flags: int) -> bool:
        """A B<cond> to its own fall-through: taken if its condition holds now."""
        if not flags & F_CONDNEXT:
            return False
        nzcv = self.core.rd(A.UC_ARM_REG_APSR) >> 28
        n, z, c, v = nzcv >> 3 & 1, nzcv >> 2 & 1, nzcv >> 1 & 1, nzcv & 1
        return [z, not z, c, not c, n, not n, v, not v, c and not z, not c or z,
                n == v, n != v, not z and n == v, z or n != v, True, True][(flags >> 4) & 0xF]

    def cost_before(self, stop: int) -> tuple[int, int]:
        """Cycles and instructions of the current block before ``stop`` (decoded
        natively from memory: pk_cost_before)."""
        insns = ctypes.c_uint32()
        cost = self.core.lib.pk_cost_before(self.core.state_ref, stop, ctypes.byref(insns))
        return cost, insns.value
