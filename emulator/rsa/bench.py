"""``pkasim bench``: what RSA-4096 costs on this chip, next to RSA-2048 and software.

Each job runs one RSA private-key operation in a firmware image on a configured chip
and measures it three ways:

* exactly, from the model: cycles from the entry of ``rsa_private`` to its return,
  and how many of them the PKA was busy;
* as the paper did: the firmware's own SysTick count at 1 ms resolution
  (its ``rsa_ms`` symbol);
* the host's wall time, which says how fast the emulator is, not the chip.

Beside time, each job reports its efficiency, the Victor paper's measure: bits of
result per 1000 cycles (nbits * 1000 / cycles), which does not depend on the clock, so
designs clocked differently compare fairly (docs/reproduction.md).

Every result is checked against Python integers (m^d mod n) before it is reported.
This module drives the RSA firmware; the emulator core knows nothing about RSA.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pkasim.base import resources
from pkasim.base.errors import LoadError
from pkasim.chip.config import ChipConfig
from pkasim.core.machine import Machine, StopReason
from pkasim.core.measure import JobResult, measure_call
from pkasim.core.reuse import LoadedMachines
from pkasim.rsa.rsakey import RsaKey, demo_key

BUILD_DIR = resources.build_dir()  # the bundled images (firmware/build in a checkout)
JSON_SCHEMA = "pkasim.bench/1"
BUDGET_SECONDS = 1000  # modeled seconds one job may take before it is called stuck
MACHINES = LoadedMachines(4)  # this process's loaded machines, reused by run_job (pkasim.core.reuse)


@dataclass(frozen=True)
class Job:
    key: str
    label: str
    image: str
    nbits: int
    engine: str  # "pka" or "software"


JOBS: tuple[Job, ...] = (
    Job("rsa2048-pka", "RSA-2048, PKA (CRT)", "xrsa_opt.elf", 2048, "pka"),
    Job("rsa4096-xrsa", "RSA-4096, xRSA (paper variant)", "xrsa.elf", 4096, "pka"),
    Job("rsa4096-xrsa-opt", "RSA-4096, xRSA (optimized)", "xrsa_opt.elf", 4096, "pka"),
    Job("rsa2048-win", "RSA-2048, PKA fixed window (CRT)", "xrsa_win.elf", 2048, "pka"),
    Job("rsa4096-win", "RSA-4096, xRSA fixed window", "xrsa_win.elf", 4096, "pka"),
    Job("rsa2048-win-sram", "RSA-2048, fixed window, SRAM table", "xrsa_win_sram.elf", 2048, "pka"),
    Job("rsa4096-win-sram", "RSA-4096, fixed window, SRAM table", "xrsa_win_sram.elf", 4096, "pka"),
    Job("rsa2048-pair", "RSA-2048, parallel pair if the PKA has it (CRT)", "xrsa_pair.elf", 2048, "pka"),
    Job("rsa4096-pair", "RSA-4096, xRSA, parallel pair if the PKA has it", "xrsa_pair.elf", 4096, "pka"),
    Job("rsa2048-soft", "RSA-2048, software bignum", "rsa_soft.elf", 2048, "software"),
    Job("rsa4096-soft", "RSA-4096, software bignum", "rsa_soft.elf", 4096, "software"),
)



@dataclass
class ConfigResult:
    config: str
    chip: str
    clock_hz: int
    muls_cycles: int
    jobs: list[JobResult]
    ratios: dict[str, float]


def _message(key: RsaKey) -> int:
    """A fixed message below n, the same for every run (results are repeatable)."""
    seed = hashlib.sha512(f"pkasim bench {key.nbits}".encode()).digest()
    stream = b"".join(hashlib.sha512(seed + bytes([i])).digest() for i in range(key.nbits // 512 + 1))
    return int.from_bytes(stream[: key.nbits // 8], "big") % key.n


def _set_u32(m: Machine, symbol: str, value: int) -> None:
    if symbol in m.image.symbols:
        m.write_symbol(symbol, value.to_bytes(4, "little"))


def run_job(config: ChipConfig, job: Job, build_dir: Path = BUILD_DIR,
            progress: Callable[[int], None] | None = None, totals: dict[str, int] | None = None,
            key: RsaKey | None = None, msg: int | None = None,
            attach: Callable[[Machine], None] | None = None, reuse: bool = True) -> JobResult:
    """One private-key operation of ``job`` on ``config``, measured and verified.
    ``totals``, when given, receives the cycles and instructions of the whole run
    (reset to exit), the run ``wall_seconds`` times. ``key`` and ``msg`` replace the
    bench's fixed key and message (``pkasim sweep``'s random keys and inputs);
    ``attach`` adds observers (a profiler) to the loaded machine before it runs.

    With ``reuse`` (and no ``attach``), the machine a previous run of the same image on
    the same chip loaded is restored to its state after the load and run again
    (``MACHINES``, pkasim.core.reuse): the same figures, without translating the code
    again. ``reuse=False`` runs on a new machine (``pkasim bench --cold``)."""
    path = resources.image(job.image, None if build_dir == BUILD_DIR else build_dir)
    if reuse and attach is None:
        with MACHINES.loaded(config, path) as m:
            return _run(m, config, job, path, progress, totals, key, msg, None)
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(path)
    return _run(m, config, job, path, progress, totals, key, msg, attach)


def _run(m: Machine, config: ChipConfig, job: Job, path: Path, progress: Callable[[int], None] | None,
         totals: dict[str, int] | None, key: RsaKey | None, msg: int | None,
         attach: Callable[[Machine], None] | None) -> JobResult:
    """run_job on a machine just loaded with the job's image."""
    for sym in ("rsa_input_key", "rsa_input_msg", "rsa_output", "rsa_private"):
        m.image.symbol(sym)  # a clear error if the image is not an RSA image
    if key is None:
        key = RsaKey.unpack(m.read_symbol("rsa_input_key", initial=True)) if job.nbits == 4096 else demo_key(job.nbits)
    if key.nbits != job.nbits:
        raise LoadError(f"{path}: built-in key is RSA-{key.nbits}, expected RSA-{job.nbits}")
    if msg is None:
        msg = _message(key)
    m.write_symbol("rsa_input_key", key.pack())
    m.write_symbol("rsa_input_msg", msg.to_bytes(job.nbits // 8, "big"))
    _set_u32(m, "rsa_op", 0)
    _set_u32(m, "rsa_check", 0)
    _set_u32(m, "core_clock_hz", config.core.clock_hz)
    budget = BUDGET_SECONDS * config.core.clock_hz
    if attach is not None:
        attach(m)

    call = measure_call(m, "rsa_private", job.image, budget, progress)
    end, wall, busy, ops = call.end, call.wall_seconds, call.pka_busy_cycles, call.pka_operations
    if totals is not None:
        totals.update(cycles=m.cycles, instructions=m.instructions)

    status = int.from_bytes(m.read_symbol("rsa_status", 4), "little", signed=True) if "rsa_status" in m.image.symbols else 0
    out = int.from_bytes(m.read_symbol("rsa_output")[: job.nbits // 8], "big")
    verified = end.reason == StopReason.EXIT and status == 0 and key.is_private(msg, out)
    fw_ms = int.from_bytes(m.read_symbol("rsa_ms", 4), "little") if "rsa_ms" in m.image.symbols else None
    cycles = call.cycles
    seconds = cycles / config.core.clock_hz
    return JobResult(
        job=job.key, label=job.label, image=job.image, nbits=job.nbits, engine=job.engine, verified=verified,
        cycles=cycles, instructions=call.instructions, modeled_ms=seconds * 1e3, ops_per_second=1 / seconds if seconds else 0.0,
        firmware_ms=fw_ms, pka_operations={k: v for k, v in ops.items() if v}, pka_busy_cycles=busy,
        pka_busy_share=busy / cycles if cycles else 0.0, cpu_only_share=1 - busy / cycles if cycles else 1.0,
        wall_seconds=wall, efficiency=job.nbits * 1000 / cycles if cycles else 0.0,
    )


def ratios(jobs: list[JobResult]) -> dict[str, float]:
    """The comparisons a reader wants, as time ratios (how many times slower)."""
    by = {j.job: j for j in jobs}
    out: dict[str, float] = {}

    def ratio(name: str, slow: str, fast: str) -> None:
        if slow in by and fast in by and by[fast].cycles:
            out[name] = by[slow].cycles / by[fast].cycles

    ratio("rsa4096_xrsa_vs_rsa2048_pka", "rsa4096-xrsa", "rsa2048-pka")
    ratio("rsa4096_xrsa_opt_vs_rsa2048_pka", "rsa4096-xrsa-opt", "rsa2048-pka")
    ratio("rsa4096_software_vs_xrsa", "rsa4096-soft", "rsa4096-xrsa")
    ratio("rsa4096_software_vs_xrsa_opt", "rsa4096-soft", "rsa4096-xrsa-opt")
    ratio("rsa2048_software_vs_pka", "rsa2048-soft", "rsa2048-pka")
    ratio("rsa4096_xrsa_paper_vs_optimized", "rsa4096-xrsa", "rsa4096-xrsa-opt")
    ratio("rsa2048_pka_vs_win", "rsa2048-pka", "rsa2048-win")
    ratio("rsa4096_xrsa_vs_win", "rsa4096-xrsa", "rsa4096-win")
    ratio("rsa4096_xrsa_opt_vs_win", "rsa4096-xrsa-opt", "rsa4096-win")
    ratio("rsa4096_win_vs_rsa2048_win", "rsa4096-win", "rsa2048-win")
    ratio("rsa4096_win_sram_vs_win", "rsa4096-win-sram", "rsa4096-win")
    return out


def to_json(results: list[ConfigResult]) -> dict:
    return {"schema": JSON_SCHEMA, "configs": [asdict(r) for r in results]}
