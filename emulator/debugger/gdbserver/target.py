"""The target description gdb reads (``qXfer:features:read:target.xml``): an ARMv6-M
core, so gdb shows xPSR, MSP, PSP, PRIMASK and CONTROL.

The register numbers here are the remote protocol's: the order of ``g``/``G`` and the
numbers of ``p``/``P``. ``org.gnu.gdb.arm.m-profile`` is the M-profile core feature
gdb requires (r0-r12, sp, lr, pc, xpsr); ``org.gnu.gdb.arm.m-system`` carries the
two stack pointers gdb uses to unwind exception frames; PRIMASK and CONTROL, which
gdb has no standard feature for, are in a feature of pkasim's own (gdb shows every
register a description lists). ARMv6-M has no BASEPRI or FAULTMASK.
"""

from __future__ import annotations

# (name, machine register name, gdb type) in remote register-number order
REGISTERS: list[tuple[str, str, str]] = (
    [(f"r{i}", f"r{i}", "uint32") for i in range(13)]
    + [("sp", "sp", "data_ptr"), ("lr", "lr", "uint32"), ("pc", "pc", "code_ptr"), ("xpsr", "xpsr", "uint32"),
       ("msp", "msp", "data_ptr"), ("psp", "psp", "data_ptr"),
       ("primask", "primask", "uint32"), ("control", "control", "uint32")]
)
FEATURES = [
    ("org.gnu.gdb.arm.m-profile", 0, 17),
    ("org.gnu.gdb.arm.m-system", 17, 19),
    ("org.pkasim.sc000.system", 19, 21),
]


def target_xml() -> str:
    parts = ['<?xml version="1.0"?>', '<!DOCTYPE target SYSTEM "gdb-target.dtd">', '<target version="1.0">',
             "  <architecture>arm</architecture>"]
    for name, lo, hi in FEATURES:
        parts.append(f'  <feature name="{name}">')
        for n in range(lo, hi):
            reg, _, typ = REGISTERS[n]
            parts.append(f'    <reg name="{reg}" bitsize="32" regnum="{n}" type="{typ}" group="general"/>')
        parts.append("  </feature>")
    parts.append("</target>")
    return "\n".join(parts) + "\n"
