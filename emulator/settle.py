"""Committing the block a run stopped in: the cycles of exactly the instructions that
executed (docs/cycle-model.md, "How the count is kept", step 3).

The native hook commits a block when the next one starts; when the engine stops
inside a block (a fault, a breakpoint, semihosting, a single step) or Unicorn asks
the cost of code outside the tables, the count is settled here.
"""

from __future__ import annotations

from collections.abc import Callable

from unicorn import arm_const as A

from .core import Core
from .cycles import COND_PENALTY, F_COND, F_CONDNEXT, block_cost, one_instruction_cost


class Settler:
    """Settles blocks of one core; ``read_memory`` reads code outside the tables."""

    def __init__(self, core: Core, read_memory: Callable[[int, int], bytes]) -> None:
        self.core = core
        self.read_memory = read_memory

    def fallback_cost(self, address: int, size: int) -> int:
        """Cost of a block outside the cost tables (the native hook asks)."""
        data = self.read_memory(address, size)
        cost, insns, flags = block_cost(data, address, self.core.rules)
        return cost | (insns << 32) | (flags << 56)

    def settle(self, pc: int) -> None:
        """Commit the block that was executing when the run stopped with PC at ``pc``."""
        s = self.core.state
        if not s.cur_valid:
            return
        start, end = s.cur_start, s.cur_end
        if start <= pc < end:
            cost, insns = self._partial(start, pc)
            s.prev_valid, s.prev_end, s.prev_flags = 1, pc, 0
        else:
            cost, insns = s.cur_cost, s.cur_insns
            if (s.cur_flags & F_COND) and pc == end and not self._cond_taken_to_next(s.cur_flags):
                cost -= COND_PENALTY
            s.prev_valid, s.prev_end, s.prev_flags = 1, end, s.cur_flags
        s.cycles += cost
        s.insns += insns
        s.blocks += 1
        s.cur_valid = 0

    def _cond_taken_to_next(self, flags: int) -> bool:
        """A B<cond> to its own fall-through: taken if its condition holds now."""
        if not flags & F_CONDNEXT:
            return False
        nzcv = self.core.rd(A.UC_ARM_REG_APSR) >> 28
        n, z, c, v = nzcv >> 3 & 1, nzcv >> 2 & 1, nzcv >> 1 & 1, nzcv & 1
        return [z, not z, c, not c, n, not n, v, not v, c and not z, not c or z,
                n == v, n != v, not z and n == v, z or n != v, True, True][(flags >> 4) & 0xF]

    def _partial(self, start: int, stop: int) -> tuple[int, int]:
        t = self.core.tables
        cost = insns = 0
        a = start
        while a < stop:
            h = (a - t.base) >> 1
            if 0 <= h < t.halfwords and t.length[h]:
                cost += t.cost[h]
                a += 2 * t.length[h]
            else:
                c, size = one_instruction_cost(self.read_memory(a, 4), a, self.core.rules)
                cost += c
                a += size
            insns += 1
        return cost, insns
