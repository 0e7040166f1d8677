"""One point of a sweep: what it runs (a Task, plain picklable data a worker process
or a Dask worker receives), its cache key, and the run itself.

The run is ``pkasim.rsa.bench.run_job``: one RSA private-key operation measured from
the entry of ``rsa_private`` to its return and checked against Python integers
(m^d mod n), with the sweep's key and message and, when per-function cycles are
asked for, the profiler attached; for a curve job, ``pkasim.ecc.bench.run_ecc_job``
(one ECC operation, checked against ``cryptography``). The result is plain data: exact model figures only
(nothing from the host), so a cached result is the result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pkasim.base import userfiles
from pkasim.base.errors import PkasimError
from pkasim.chip.config import ChipConfig
from pkasim.ecc.bench import ECC_JOBS, run_ecc_job
from pkasim.rsa.bench import Job, run_job
from pkasim.rsa.rsakey import RsaKey

RESULT_SCHEMA = "pkasim.sweep.point/1"  # the layout of a stored result; bump to drop old entries
FRONT_ENDS = {"cli", "sweep", "emulator/rsa/plot.py"}
DATA = {"configs", "firmware", "peripherals"}  # folders inside an installed pkasim that are not its model code


@dataclass(frozen=True)
class Task:
    config: ChipConfig
    elf: bytes
    elf_sha256: str
    image: str
    key: RsaKey | None  # None for a curve job
    message: int
    profile: bool
    version: str  # the pkasim the cache key was made with: a worker running another refuses
    ecc_job: str = ""  # a curve job (pkasim.ecc.bench.ECC_JOBS): its fixed inputs, no key


@lru_cache(maxsize=1)
def pkasim_version() -> str:
    """The package version and a digest of the model's sources (the package's .py .c .h,
    without the front ends that only drive it: the subcommands, the sweep package, the
    CLI and the bench's table and chart): the version number alone does not change when
    a cycle rule does, and a stale cycle count must never come back from the cache.

    The files are named as in the repository (``emulator/...``, ``peripherals/...``),
    so a checkout and a wheel built from it (which carries the C sources as package
    data) give the same digest, wherever each is installed."""
    import pkasim
    import pkasim.peripherals

    digest = hashlib.sha256()
    for top, folder in (("emulator", Path(pkasim.__file__).parent), ("peripherals", Path(pkasim.peripherals.__file__).parent)):
        for path in sorted(folder.rglob("*")):
            inner = path.relative_to(folder)
            if top == "emulator" and inner.parts[0] in DATA:
                continue
            rel = Path(top) / inner
            if path.suffix in (".py", ".c", ".h") and not FRONT_ENDS & {rel.parts[1], rel.as_posix()}:
                digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{pkasim.__version__}+{digest.hexdigest()[:16]}"


def cache_key(task: Task, description: Any) -> str:
    """SHA-256 of everything that determines the result: the ELF bytes, the resolved
    chip description, the inputs (key and message), whether the profiler ran, the
    result layout and the pkasim version."""
    what = {
        "schema": RESULT_SCHEMA, "version": task.version, "elf": task.elf_sha256,
        "chip": description,
        "key": [task.key.nbits, task.key.e, str(task.key.p), str(task.key.q)] if task.key is not None else None,
        "message": str(task.message), "profile": task.profile, "ecc_job": task.ecc_job,
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
    from pkasim.analysis.profiler import Profiler

    if task.version != pkasim_version():
        raise PkasimError(f"this worker runs pkasim {pkasim_version()}, the sweep expects {task.version}: "
                          "install the same pkasim on every worker")
    profiler = Profiler() if task.profile else None
    path = _image_file(task)
    attach = (lambda m: m.observe(profiler)) if profiler is not None else None
    if task.ecc_job:
        ecc = next(j for j in ECC_JOBS if j.key == task.ecc_job)
        res = run_ecc_job(task.config, dataclasses.replace(ecc, image=path.name), path.parent, attach=attach)
    else:
        job = Job(key=task.image, label=task.image, image=str(path), nbits=task.key.nbits, engine="pka")
        res = run_job(task.config, job, path.parent, key=task.key, msg=task.message, attach=attach)
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
