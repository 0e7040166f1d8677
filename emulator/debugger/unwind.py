"""The call stack, unwound with the ELF's call frame information (.debug_frame),
through exception frames (an EXC_RETURN value in LR means the caller's registers
were stacked by the core: ARMv6-M B1.5.6)."""

from __future__ import annotations

from dataclasses import dataclass

from pkasim.core.machine import Machine
from pkasim.debugger.dwarf import LR, DebugInfo

MAX_FRAMES = 64


@dataclass(frozen=True)
class Frame:
    pc: int
    sp: int  # the frame's CFA: the caller's SP when the call was made
    exception: bool = False  # the core entered an exception here (the frame below is a handler)


def call_stack(machine: Machine, info: DebugInfo) -> list[Frame]:
    """Innermost first. Stops where no frame information or no code is found."""
    regs = machine.registers()
    pc, sp, lr = regs["pc"] & ~1, regs["sp"], regs["lr"]
    others = {7: regs["r7"]}
    frames = [Frame(pc, sp)]
    lr_valid = True
    for _ in range(MAX_FRAMES):
        rule = info.frame_rule(pc)
        try:
            if rule is None:
                if not lr_valid:
                    break
                ret = lr
            else:
                base = sp if rule.cfa_reg == 13 else others.get(rule.cfa_reg)
                if base is None:
                    break
                cfa = base + rule.cfa_offset
                if LR in rule.saved:
                    ret = machine.read_u32(cfa + rule.saved[LR])
                elif lr_valid:
                    ret = lr
                else:
                    break
                for reg in others:
                    if reg in rule.saved:
                        others[reg] = machine.read_u32(cfa + rule.saved[reg])
                sp = cfa
            lr_valid = False
            if ret >= 0xFFFFFFF0:  # EXC_RETURN: unstack r0-r3, r12, lr, pc, xpsr
                if ret & 4:
                    sp = regs["psp"]
                lr = machine.read_u32(sp + 20)
                pc = machine.read_u32(sp + 24) & ~1
                xpsr = machine.read_u32(sp + 28)
                sp += 0x20 + (4 if xpsr & (1 << 9) else 0)
                lr_valid = True
                frames.append(Frame(pc, sp, exception=True))
                continue
        except Exception:  # noqa: BLE001 - an unreadable stack ends the walk
            break
        pc = ret & ~1
        if pc == 0 or machine.config.region_at(pc) is None:
            break
        frames.append(Frame(pc, sp))
    return frames
