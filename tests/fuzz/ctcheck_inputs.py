"""`pkasim ct-check` inputs: secret specifications, --inputs directories and --load
files as a hostile user gives them.

Secrets name real, zero-size, constant, .bss and unknown symbols with every kind and
awkward sizes (``bytes:0``, ``bytes:-1``, 20 digits, ``rsa-key:1024``); --inputs
directories hold files larger than the symbol, empty ones, hidden ones, a FIFO, a
subdirectory missing its file, one input only; --random takes 0, 1 and 20 digits.
Runs are few and short (ctleak.elf, a budget of 200,000 cycles): ct-check exits 0
(the runs agree), 1 (they differ), 64, 65, 66, 124 or 125 (docs/ct-check.md).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from fuzzing import BUILD

SYMBOLS = ("ct_secret", "ct_mode", "main", "_ebss", "_estack", "no_such_symbol", "")
KINDS = ("", "=bytes:4", "=bytes:0", "=bytes:-1", "=bytes:99999999999999999999", "=bytes:x", "=rsa-key:2048",
         "=rsa-key:1024", "=rsa-msg:2048", "=nonsense:1", "=", "=bytes")


def _inputs(rng: random.Random, workdir: Path, names: list[str], bent: bool) -> str:
    """An --inputs directory: two or three good inputs (4 bytes, ct_secret's size),
    or, when ``bent``, one with a flaw."""
    root = workdir / "ct-inputs"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    count = rng.choice([2, 3])
    flaw = rng.choice(["size", "empty", "fifo", "hidden", "one", "missing", "dir-in-flat"]) if bent else None
    if flaw == "one":
        count = 1
    for i in range(count):
        size = rng.choice([0, 5, 5000]) if flaw == "size" and i == 0 else (0 if flaw == "empty" and i == 0 else 4)
        data = bytes(rng.randrange(256) for _ in range(size))
        if len(names) == 1 and flaw != "dir-in-flat":
            (root / f"in{i}").write_bytes(data)
        else:
            sub = root / f"in{i}"
            sub.mkdir()
            for name in names:
                if not (flaw == "missing" and i == 0):
                    (sub / (name or "x")).write_bytes(data)
    if flaw == "fifo":
        os.mkfifo(root / "fifo")
    if flaw == "hidden":
        (root / ".hidden").write_bytes(b"x" * 99)
    return str(root)


def case(rng: random.Random, workdir: Path) -> tuple[list[str], str]:
    """(argv, what): one ct-check command line on ctleak.elf; most are valid but for
    one or two flaws."""
    secrets = ["ct_secret"]
    if rng.random() < 0.3:
        secrets = [rng.choice(SYMBOLS) + rng.choice(KINDS)]
    if rng.random() < 0.1:
        secrets.append(rng.choice(SYMBOLS) + rng.choice(KINDS[:2]))
    argv = ["ct-check", str(BUILD / "ctleak.elf"), "--max-cycles", "200000", "-q"]
    for s in secrets:
        argv += ["--secret", s]
    if rng.random() < 0.5:
        argv += ["--random", rng.choice(["2", "3", "2", "3", "0", "1", "-1", "99999999999999999999", "x"])]
        if rng.random() < 0.3:
            argv += ["--seed", rng.choice(["1", "-5", "x"])]
    else:
        names = [s.split("=")[0] for s in secrets]
        argv += ["--inputs", _inputs(rng, workdir, names, rng.random() < 0.5) if rng.random() < 0.95 else
                 rng.choice(["/dev/zero", str(workdir / "none"), str(BUILD / "hello.elf")])]
    if rng.random() < 0.2:
        argv += ["--load", f"ct_mode={rng.choice(['/dev/zero', '/dev/null', str(workdir / 'none')])}"]
    if rng.random() < 0.1:
        argv += ["--save-inputs", rng.choice([str(workdir / "ct-saved"), "/dev/full", str(BUILD / "hello.elf")])]
    return argv, " ".join(argv)
