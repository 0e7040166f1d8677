"""Debugger command scripts (`pkasim debug --commands`), drawn from the command table
of docs/debugger.md with hostile arguments: counts of 0, -1 and 20 digits, addresses
past 32 bits, unknown symbols and files, expressions that divide by zero, shift by
thousands or nest deep, watch ranges over device registers, x/ with every unit and
absurd counts, going back before the start of history, commands after the firmware
exited; and script files that are not files (/dev/zero, a FIFO, a directory, over
1 MiB). Scripted mode exits 0 (every command ran) or 64 (one was refused), 66 for
a script that cannot be read, 65 for one that is too long; never 70.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from fuzzing import BUILD

NUMBERS = ("", "0", "1", "3", "-1", "99999999999999999999", "0x10", "x", "1e3")
ADDRESSES = ("0x0", "0xc0", "0x20000000", "0x20003ffc", "0xffffffff", "0x100000000", "-4", "0x40010000", "main",
             "_ebss", "nosuch", "*0x20000000", "")
EXPRESSIONS = ("r0", "$sp", "xpsr", "pc + 2", "main", "&main", "*0x20000000", "1/0", "5 % 0", "1 << 5000",
               "~0", "((((((((1))))))))", "(" * 300 + "1" + ")" * 300, "r99", "$nosuch", "0x", "'a'", "main[",
               "*0xffffffff", "-(1<<63)")
COMMANDS = (
    lambda r: f"stepi {r.choice(NUMBERS)}", lambda r: f"si {r.choice(NUMBERS)}", lambda r: f"step {r.choice(NUMBERS)}",
    lambda r: f"next {r.choice(NUMBERS)}", lambda r: "nexti", lambda r: "finish", lambda r: "continue",
    lambda r: f"cycle {r.choice(NUMBERS + ('500', '100000'))}", lambda r: "pka-next",
    lambda r: f"break {r.choice(ADDRESSES + ('hello.c:12', 'nosuch.c:1', 'hello.c:-1', 'hello.c:99999999999'))}",
    lambda r: f"{r.choice(['watch', 'rwatch', 'awatch'])} {r.choice(ADDRESSES)}"
              f"{r.choice(['', ':4', ':0', ':-1', ':99999999999'])}",
    lambda r: f"delete {r.choice(NUMBERS)}", lambda r: "info breakpoints",
    lambda r: f"print{r.choice(['', '/x', '/d', '/q'])} {r.choice(EXPRESSIONS)}",
    lambda r: f"x/{r.choice(['', '4', '0', '99999999', '-1'])}{r.choice(['x', 'd', 'u', 'q', ''])}"
              f"{r.choice(['b', 'h', 'w', 'g', 'z', ''])} {r.choice(ADDRESSES)}",
    lambda r: r.choice(["registers", "backtrace", "bt", "list", "disassemble", "pka", "systick", "nvic", "cycles",
                        "info history", "help", "help break", "help nosuch"]),
    lambda r: f"stack {r.choice(NUMBERS)}",
    lambda r: f"reverse-stepi {r.choice(NUMBERS)}", lambda r: "reverse-step", lambda r: "reverse-continue",
    lambda r: r.choice(["", "   ", "# comment", "frobnicate", "\x00", "é", "break", "print", "x/4x"]),
)


def files(workdir: Path) -> dict[str, str]:
    (workdir / "dbg-dir").mkdir(exist_ok=True)
    fifo = workdir / "dbg-fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (workdir / "dbg-huge.txt").write_text("cycles\n" * 200_000)
    return {"zero": "/dev/zero", "fifo": str(fifo), "dir": str(workdir / "dbg-dir"), "huge": str(workdir / "dbg-huge.txt"),
            "missing": str(workdir / "none.txt")}


def case(rng: random.Random, pool: dict[str, str], workdir: Path) -> tuple[list[str], str]:
    """(argv, what): a script of a few commands on a small image, or a script path
    that is not a script."""
    image = str(BUILD / rng.choice(["hello.elf", "fault.elf", "systick.elf"]))
    if rng.random() < 0.1:
        return ["debug", image, "--commands", pool[rng.choice(list(pool))]], "script path"
    lines = [rng.choice(COMMANDS)(rng) for _ in range(rng.randint(1, 12))]
    script = workdir / "dbg-script.txt"
    script.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
    argv = ["debug", image, "--commands", str(script)]
    if rng.random() < 0.2:
        argv.append("--no-reverse")
    if rng.random() < 0.1:
        argv += ["--snapshot-interval", rng.choice(["0", "-1", "1000", "x"])]
    return argv, " | ".join(lines)[:300]
