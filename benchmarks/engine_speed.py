"""Engine speed: pkasim on each engine, plain Unicorn and QEMU, on the same ELFs, in one run.

Workloads (instruction counts from pkasim; every engine runs the same instructions,
and each run's output is checked equal to pkasim's):

* kernels:  firmware/build/kernels.elf, Embench-IoT-style integer kernels (CRC-32,
            matrix multiply, sort, FIR, a state machine, string search);
* bignum:   firmware/build/compute.elf, a 64x64-limb schoolbook multiply;
* coremark: an EEMBC CoreMark ELF built for this chip's memory map, if ``--coremark
            ELF`` names one (its ``seed4_volatile`` holds the iteration count);
* the RSA jobs of ``pkasim bench`` (pkasim only: the others have no PKA), the wall time
  of each job's run as ``pkasim bench`` reports it (reset to exit), median of 3.

Engines: ``pkasim:<engine>`` for each pkasim engine (docs/engine.md: ``patched`` when
it is built, ``stock``: the registry's Unicorn wheel), ``unicorn`` (the stock wheel,
no hooks but the one semihosting's exit needs), ``qemu`` (``qemu-system-arm -M
microbit``, no cycle model), and ``baseline`` (pkasim from another checkout,
``--baseline DIR``: the same jobs on an older pkasim, for "x times faster than").

Each workload runs at two iteration counts in fresh processes; an engine's rate is
(instructions at the larger count - at the smaller) / (CPU seconds at the larger -
at the smaller), so start-up, loading and first translations cancel out. CPU time is
the run's own (``time.process_time`` around it) for the Python engines and the
process's for QEMU. Timing belongs here, never in tests: the machine is shared, so
only ratios measured in one run mean much; the median of ``--repeat`` rounds is
printed.

    .venv/bin/python benchmarks/engine_speed.py [--coremark ELF] [--baseline DIR]
        [--repeat 3] [--minsns 100e6] [--no-rsa] [--jobs rsa2048-pka,...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "firmware" / "build"
PER_ITERATION = {"kernels": 104_000, "bignum": 185_000, "coremark": 380_000}  # instructions, roughly


# ---------------------------------------------------------------------------- children
def _import_pkasim(root: str | None):
    """pkasim's Machine, load_config and bench module, from ``root`` if given
    (a checkout, old layout ``emulator`` or new ``pkasim``)."""
    if root:
        sys.path.insert(0, root)
        if (Path(root) / "emulator" / "machine.py").exists():  # a checkout from before the pkasim package
            from emulator import Machine, bench, load_config
            return Machine, load_config, bench
    try:
        from pkasim.chip.config import load_config
        from pkasim.core.machine import Machine
        from pkasim.rsa import bench
    except ImportError:
        from emulator import Machine, bench, load_config
    return Machine, load_config, bench


def _engine_name() -> str:
    try:
        from pkasim.native import engine
    except ImportError:
        return "stock"
    return engine.selected()


def child_pkasim(elf: str, symbol: str, count: int, root: str | None, variant: str = "plain") -> dict:
    """One run; ``variant``: plain, ws1 (one flash wait state: the cost of flash
    data reads and the fetch rule at every block), watch (a write watchpoint on the
    image's checksum word: the startup code zeroes it, the run writes it at its end; each hit
    stops the run, which is resumed; the kernels' arrays share its page), watchcold (a write
    watchpoint on a word of SRAM 4 KiB below its top, a page the program does not touch)."""
    import dataclasses
    import io
    Machine, load_config, _ = _import_pkasim(root)
    out = io.BytesIO()
    config = load_config()
    if variant == "ws1":
        flash = dataclasses.replace(config.flash, wait_states=1)
        config = dataclasses.replace(config, memory={**config.memory, "flash": flash})
    m = Machine(config, stdout=out, stderr=io.BytesIO())
    m.load(elf)
    m.write_symbol(symbol, count.to_bytes(4, "little"))
    if variant == "watch":
        m.add_watchpoint(next(n for n in ("kernels_checksum", "compute_checksum") if _has(m, n)), kind="write")
    if variant == "watchcold":
        sram = config.sram
        m.add_watchpoint(sram.base + sram.size - 4096, 4, "write")
    t0 = time.process_time()
    r = m.run()
    while r.reason.value == "watchpoint":  # (the startup code zeroes the watched word, the run writes it)
        r = m.run()
    cpu = time.process_time() - t0
    return {"cpu": cpu, "insns": r.instructions, "cycles": r.cycles, "exit": r.exit_code,
            "out": out.getvalue().decode(errors="replace"), "engine": "baseline" if root else _engine_name()}


def _has(m, name: str) -> bool:
    try:
        m.image.symbol(name)
    except Exception:  # noqa: BLE001 - any lookup failure means "no such symbol"
        return False
    return True


def child_unicorn(elf: str) -> dict:
    """Plain Unicorn (whichever library pkasim's engine selection loaded): memory
    mapped as the chip's, the image loaded, no hook but semihosting's exit."""
    from unicorn import UC_ARCH_ARM, UC_HOOK_INTR, UC_MODE_MCLASS, UC_MODE_THUMB, Uc
    from unicorn import arm_const as A

    from pkasim.chip.config import load_config
    from pkasim.chip.loader import load_image
    from pkasim.native import engine

    engine.select()  # the library PKASIM_ENGINE names, as pkasim would run on
    config = load_config()
    image = load_image(elf, config)
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
    for region in config.memory.values():
        uc.mem_map(region.base, region.size)
    for base, data in image.segments:
        uc.mem_write(base, data)
    uc.reg_write(A.UC_ARM_REG_SP, int.from_bytes(uc.mem_read(0, 4), "little"))
    pc = int.from_bytes(uc.mem_read(4, 4), "little")
    done, out = [None], []

    def on_bkpt(uc, intno, _):
        op, arg = uc.reg_read(A.UC_ARM_REG_R0), uc.reg_read(A.UC_ARM_REG_R1)
        if op in (0x18, 0x20):
            done[0] = arg if op == 0x18 else int.from_bytes(uc.mem_read(arg + 4, 4), "little")
            if op == 0x18:
                done[0] = 0 if arg == 0x20026 else 1
        elif op == 0x03:
            out.append(bytes(uc.mem_read(arg, 1)))
        elif op == 0x04:
            s = b""
            while (c := bytes(uc.mem_read(arg + len(s), 1))) != b"\0":
                s += c
            out.append(s)
        elif op == 0x05:
            ptr, n = (int.from_bytes(uc.mem_read(arg + 4 * i, 4), "little") for i in (1, 2))
            out.append(bytes(uc.mem_read(ptr, n)))
            uc.reg_write(A.UC_ARM_REG_R0, 0)
        else:
            uc.reg_write(A.UC_ARM_REG_R0, 0)
        uc.reg_write(A.UC_ARM_REG_PC, (uc.reg_read(A.UC_ARM_REG_PC) + 2) | 1)
        uc.emu_stop()

    uc.hook_add(UC_HOOK_INTR, on_bkpt)
    t0 = time.process_time()
    while done[0] is None:
        uc.emu_start(pc | 1, 0xFFFFFFFF)
        pc = uc.reg_read(A.UC_ARM_REG_PC)
    cpu = time.process_time() - t0
    return {"cpu": cpu, "exit": done[0], "out": b"".join(out).decode(errors="replace"), "engine": _engine_name()}


def child_rsa(job_key: str, root: str | None) -> dict:
    _, load_config, bench = _import_pkasim(root)
    job = next(j for j in bench.JOBS if j.key == job_key)
    config = load_config()
    walls, r = [], None
    for _ in range(3):  # the job's own wall (reset to exit, as `pkasim bench` reports it); median of 3
        r = bench.run_job(config, job)
        walls.append(r.wall_seconds)
    return {"wall": sorted(walls)[1], "cycles": r.cycles, "verified": r.verified,
            "engine": "baseline" if root else _engine_name()}


# ---------------------------------------------------------------------------- parent
def patched_copy(elf: Path, symbol: str, value: int, tmp: Path) -> Path:
    """A copy of ``elf`` whose ``symbol`` (an initialised word) starts as ``value``:
    for QEMU and plain Unicorn, which load the file as it is."""
    from elftools.elf.elffile import ELFFile
    data = bytearray(elf.read_bytes())
    with elf.open("rb") as f:
        ef = ELFFile(f)
        sym = ef.get_section_by_name(".symtab").get_symbol_by_name(symbol)[0]
        addr = sym["st_value"]
        sec = next(s for s in ef.iter_sections() if s["sh_type"] == "SHT_PROGBITS" and
                   s["sh_addr"] <= addr < s["sh_addr"] + s["sh_size"])
        off = sec["sh_offset"] + addr - sec["sh_addr"]
    data[off:off + 4] = value.to_bytes(4, "little")
    out = tmp / f"{elf.stem}-{symbol}-{value}.elf"
    out.write_bytes(data)
    return out


class Runner:
    def __init__(self, name: str, python: str, env: dict[str, str], root: str | None = None) -> None:
        self.name, self.python, self.env, self.root = name, python, env, root

    def child(self, *args: str) -> dict:
        cmd = [self.python, str(Path(__file__).resolve()), "--child", *args]
        if self.root:
            cmd += ["--root", self.root]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: child failed: {done.stderr.strip()[-800:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def qemu_run(elf: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(["qemu-system-arm", "-M", "microbit", "-kernel", str(elf), "-semihosting-config",
                           "enable=on,target=native", "-nographic", "-monitor", "none", "-serial", "none"],
                          capture_output=True, text=True, check=False, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "exit": done.returncode, "out": done.stdout + done.stderr}  # semihosting writes to stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coremark", type=Path, help="a CoreMark ELF for this chip (seed4_volatile = iterations)")
    parser.add_argument("--baseline", help="another pkasim checkout (with its native hook built) to compare with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--minsns", type=float, default=100e6, help="instructions between the two counts")
    parser.add_argument("--no-rsa", action="store_true", help="skip the RSA bench jobs")
    parser.add_argument("--jobs", help="comma-separated RSA job keys (default: all)")
    parser.add_argument("--engines", default="patched,stock", help="pkasim engines to run (docs/engine.md)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        kind, *rest = args.child
        if kind == "pkasim":
            result = child_pkasim(rest[0], rest[1], int(rest[2]), args.root, rest[3] if len(rest) > 3 else "plain")
        elif kind == "unicorn":
            result = child_unicorn(rest[0])
        else:
            result = child_rsa(rest[0], args.root)
        print(json.dumps(result))
        return 0

    sys.path.insert(0, str(ROOT))
    env = dict(os.environ)
    runners = []
    for engine in args.engines.split(","):
        r = Runner(f"pkasim:{engine}", sys.executable, {**env, "PKASIM_ENGINE": engine})
        runners.append(r)
    baseline = None
    if args.baseline:
        base = Path(args.baseline).resolve()
        py = base / ".venv" / "bin" / "python"
        baseline = Runner("baseline", str(py if py.exists() else sys.executable), {**env, "PKASIM_ENGINE": "stock"},
                          root=str(base))
    plain = Runner("unicorn", sys.executable, {**env, "PKASIM_ENGINE": "stock"})
    plain_patched = Runner("unicorn:patched", sys.executable, {**env, "PKASIM_ENGINE": "patched"})
    have_qemu = shutil.which("qemu-system-arm") is not None

    workloads = [("kernels", BUILD / "kernels.elf", "iterations"), ("bignum", BUILD / "compute.elf", "iterations")]
    if args.coremark:
        workloads.append(("coremark", args.coremark.resolve(), "seed4_volatile"))

    tmp = Path(tempfile.mkdtemp(prefix="pkasim-engine-speed-"))
    rates: dict[tuple[str, str], list[float]] = {}
    ratio_rows: dict[tuple[str, str, str], list[float]] = {}
    try:
        for rnd in range(args.repeat):
            for name, elf, sym in workloads:
                n2 = max(2, int(args.minsns / PER_ITERATION[name]))
                n1 = max(1, n2 // 10)
                counts = (n1, n2)
                row: dict[str, float] = {}
                ref = None
                for r in runners + ([baseline] if baseline else []):
                    res = [r.child("pkasim", str(elf), sym, str(n)) for n in counts]
                    if ref is None:
                        ref = res
                    for a, b in zip(res, ref):
                        if (a["cycles"], a["exit"], a["out"]) != (b["cycles"], b["exit"], b["out"]):
                            raise SystemExit(f"{name}: {r.name} differs from {runners[0].name}: "
                                             f"{a['cycles']} cycles exit {a['exit']} vs {b['cycles']} exit {b['exit']}")
                    label = r.name if r is baseline else f"pkasim:{res[0]['engine']}"
                    row[label] = (res[1]["insns"] - res[0]["insns"]) / (res[1]["cpu"] - res[0]["cpu"]) / 1e6
                dinsns = ref[1]["insns"] - ref[0]["insns"]
                files = [patched_copy(elf, sym, n, tmp) for n in counts]
                for runner in (plain, plain_patched):
                    res = [runner.child("unicorn", str(f)) for f in files]
                    if runner is plain_patched and res[0]["engine"] != "patched":
                        continue  # pkasim's engine is not built: no such column
                    for a, b in zip(res, ref):
                        if (a["exit"], a["out"]) != (b["exit"], b["out"]):
                            raise SystemExit(f"{name}: plain Unicorn differs: exit {a['exit']} out {a['out']!r}")
                    row[runner.name] = dinsns / (res[1]["cpu"] - res[0]["cpu"]) / 1e6
                if have_qemu:
                    res = [qemu_run(f) for f in files]
                    for a, b in zip(res, ref):
                        if a["out"] != b["out"]:
                            raise SystemExit(f"{name}: QEMU output differs: {a['out']!r}")
                    row["qemu"] = dinsns / (res[1]["cpu"] - res[0]["cpu"]) / 1e6
                for k, v in row.items():
                    rates.setdefault((name, k), []).append(v)
                for k in row:
                    for ref_name in ("qemu", "unicorn", "unicorn:patched", "baseline"):
                        if ref_name == "unicorn:patched" and k != "pkasim:patched":
                            continue  # (what pkasim's accounting costs on the same engine)
                        if ref_name in row and k != ref_name and k.startswith(("pkasim", "unicorn:")):
                            ratio_rows.setdefault((name, k, ref_name), []).append(row[k] / row[ref_name])
                for r in runners if name != "coremark" else []:
                    # the same run with one flash wait state, and with a watchpoint: CPU time
                    # against the plain run's, same engine, same round
                    for variant in ("ws1", "watch", "watchcold"):
                        res = [r.child("pkasim", str(elf), sym, str(n), variant) for n in counts]
                        dt = res[1]["cpu"] - res[0]["cpu"]
                        plain_rate = row[f"pkasim:{res[0]['engine']}"]
                        variant_rate = (res[1]["insns"] - res[0]["insns"]) / dt / 1e6
                        ratio_rows.setdefault((name, f"pkasim:{res[0]['engine']}", variant), []).append(
                            plain_rate / variant_rate)
                print(f"round {rnd + 1} {name}: " + ", ".join(f"{k} {v:,.0f}" for k, v in row.items()),
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print("\nMIPS (CPU time; median of rounds)")
    names = sorted({k for _, k in rates}, key=lambda k: (not k.startswith("pkasim"), k))
    print(f"{'workload':10s}" + "".join(f"{n:>18s}" for n in names))
    for name, *_ in workloads:
        print(f"{name:10s}" + "".join(f"{statistics.median(rates[(name, n)]):18,.0f}" if (name, n) in rates
                                      else f"{'-':>18s}" for n in names))
    print("\nratios (each measured within one round; median): speed of the first over the second;")
    print("for ws1 (one flash wait state), watch (a watchpoint on a page the program uses) and watchcold\n"
          "(one on a page it does not touch): how many times slower than the plain run")
    for (name, k, ref_name), vals in sorted(ratio_rows.items()):
        print(f"  {name:10s} {k:16s} / {ref_name:15s} {statistics.median(vals):6.2f}x")

    if not args.no_rsa:
        from pkasim.rsa import bench
        jobs = [j.key for j in bench.JOBS] if not args.jobs else args.jobs.split(",")
        print("\nRSA bench jobs: wall seconds of each job's run, reset to exit (median of 3 in one process)")
        header = [r.name for r in runners] + (["baseline"] if baseline else [])
        print(f"{'job':20s}" + "".join(f"{h:>16s}" for h in header) +
              ("".join(f"{h + '/base':>18s}" for h in header[:-1]) if baseline else ""))
        for key in jobs:
            walls = {}
            cycles = None
            for r in runners + ([baseline] if baseline else []):
                res = r.child("rsa", key)
                if cycles is not None and res["cycles"] != cycles:
                    raise SystemExit(f"{key}: {r.name} counts {res['cycles']} cycles, not {cycles}")
                cycles = res["cycles"]
                walls[r.name] = res["wall"]
            line = f"{key:20s}" + "".join(f"{walls[h]:16.3f}" for h in header)
            if baseline:
                line += "".join(f"{walls['baseline'] / walls[h]:17.2f}x" for h in header[:-1])
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
