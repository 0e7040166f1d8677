"""References for the stepping tests: a place where a run has translated the code a
step goes through, and what a fresh run does from a stop (never stepping)."""

from __future__ import annotations

from pkasim.core.machine import Machine


def loop_branch(m: Machine) -> int:
    """The `b 3b` that closes bn_muladdc_thumb's unrolled loop in rsa_soft.elf
    (hand-written assembly, the same with every compiler): the function's last
    instruction before its epilogue (pop, mov, mov, pop: 8 bytes). Its target block
    is the loop body the run before the stop has translated."""
    sym = m.image.symbol("bn_muladdc_thumb")
    addr = (sym.address & ~1) + sym.size - 10
    hw = int.from_bytes(m.read_memory(addr, 2), "little")
    assert hw >> 11 == 0b11100 and hw & 0x400, f"no backward B at 0x{addr:x}"
    return addr


def starts_after(m: Machine, max_cycles: int) -> list[tuple[int, int, int]]:
    """(instruction number, cycle it starts, address) of each instruction a run from
    here executes within ``max_cycles``."""
    seen: list[tuple[int, int, int]] = []
    hook = m.on_instructions(0, 0xFFFFFFFF, lambda a, size, cycle, n: seen.append((n, cycle, a)))
    m.run(max_cycles=max_cycles)
    m.remove_instruction_hook(hook)
    return seen


def passes(m: Machine, pc: int, max_cycles: int) -> list[tuple[int, int, dict]]:
    """(instruction number, cycle, registers) each time a run from here starts the
    instruction at ``pc``, within ``max_cycles``."""
    seen: list[tuple[int, int, dict]] = []
    hook = m.on_instructions(pc, pc + 2, lambda a, size, cycle, n: seen.append((n, cycle, m.registers())))
    m.run(max_cycles=max_cycles)
    m.remove_instruction_hook(hook)
    return seen
