"""One point of a sweep: what it runs (a Task, plain picklable data a worker process
or a Dask worker receives), its cache key, and the run itself.

The run is ``emulator.bench.run_job``: one RSA private-key operation measured from
the entry of ``rsa_private`` to its return and checked against Python integers
(m^d mod n), with the sweep's key and message and, when per-function cycles are
asked for, the profiler attached. The result is plain data: exact model figures only
(nothing from the host), so a cached result is the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import userfiles
from ..bench import Job, run_job
from ..config import ChipConfig
from ..errors import PkasimError
from ..rsakey import RsaKey

RESULT_SCHEMA = "pkasim.sweep.point/1"  # the layout of a stored result; bump to drop old entries
_ROOT = Path(__file__).resolve().parent.parent.parent
FRONT_ENDS = {"commands", "sweep", "emulator/cli.py", "emulator/bench_cli.py", "emulator/plot.py"}


@dataclass(frozen=True)
class Task:
    config: ChipConfig
    elf: bytes
    elf_sha256: str
    image: str
    key: RsaKey
    message: int
    profile: bool
    version: str  # the pkasim the cache key was made with: a worker running another refuses


@lru_cache(maxsize=1)
def pkasim_version() -> str:
    """The package version and a digest of the model's sources (emulator/ and
    peripherals/, .py .c .h, without the front ends that only drive it: the
    subcommands, the sweep package, the CLI and the bench's table and chart): the
    version number alone does not change when a cycle rule does, and a stale cycle
    count must never come back from the cache."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("pkasim")
    except PackageNotFoundError:
        number = "unknown"
    digest = hashlib.sha256()
    for top in ("emulator", "peripherals"):
        for path in sorted((_ROOT / top).rglob("*")):
            rel = path.relative_to(_ROOT)
            if path.suffix in (".py", ".c", ".h") and not FRONT_ENDS & {rel.parts[1], str(rel)}:
                digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{number}+{digest.hexdigest()[:16]}"


def cache_key(task: Task, description: Any) -> str:
    """SHA-256 of everything that determines the result: the ELF bytes, the resolved
    chip description, the inputs (key and message), whether the profiler ran, the
    result layout and the pkasim version."""
    what = {
        "schema": RESULT_SCHEMA, "version": task.version, "elf": task.elf_sha256,
        "chip": description, "key": [task.key.nbits, task.key.e, str(task.key.p), str(task.key.q)],
        "message": str(task.message), "profile": task.profile,
    }
    text = json.dumps(what, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _image_file(task: Task) -> Path:
    """The ELF on this worker's disk, written once per content (a remote worker need
    not share the file system; the bytes run are the bytes hashed)."""
    folder = Path(tempfile.gettempdir()) / "pkasim-sweep-elf"
    folder.mkdir(exist_ok=True)
    path = folder / f"{task.elf_sha256}.elf"
    try:  # a regular file of the right bytes; anything else (even a FIFO someone left here) is replaced
        held = userfiles.read_bounded(path, len(task.elf))
    except OSError:
        held = None
    if held is None or hashlib.sha256(held).hexdigest() != task.elf_sha256:
        tmp = folder / f".{task.elf_sha256}.{os.getpid()}"
        tmp.write_bytes(task.elf)
        os.replace(tmp, path)
    return path


def run_point(task: Task) -> dict[str, Any]:
    """Run one point; the measured figures as plain data (what the cache stores)."""
    from ..profiler import Profiler

    if task.version != pkasim_version():
        raise PkasimError(f"this worker runs pkasim {pkasim_version()}, the sweep expects {task.version}: "
                          "install the same pkasim on every worker")
    profiler = Profiler() if task.profile else None
    path = _image_file(task)
    job = Job(key=task.image, label=task.image, image=str(path), nbits=task.key.nbits, engine="pka")
    res = run_job(task.config, job, path.parent, key=task.key, msg=task.message,
                  attach=(lambda m: m.observe(profiler)) if profiler is not None else None)
    out: dict[str, Any] = {
        "verified": res.verified, "cycles": res.cycles, "instructions": res.instructions,
        "clock_hz": task.config.core.clock_hz, "firmware_ms": res.firmware_ms,
        "pka_operations": res.pka_operations, "pka_busy_cycles": res.pka_busy_cycles,
    }
    if profiler is not None:
        out["functions"] = {r.name: {"exclusive": r.exclusive_cycles, "inclusive": r.inclusive_cycles,
                                     "calls": r.calls} for r in profiler.rows()}
    return out


def describe(task: Task) -> dict[str, Any]:
    """The task without its bytes (for messages)."""
    return {k: v for k, v in asdict(task).items() if k not in ("elf", "config", "key")}
