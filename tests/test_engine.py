"""pkasim's engine (Unicorn 2.1.4 with engine/patches/) and the registry's stock wheel run
the same firmware (19 images, and every fault kind in and out of HardFault) to the same
end: cycles, instructions, sleep, exit code, output and fault reports (docs/engine.md).
Each engine runs in its own process (the engine is chosen once per process, by
PKASIM_ENGINE)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stock_util import on_stock_wheel

ROOT = Path(__file__).resolve().parent.parent

# (image, symbols to set as 32-bit words, cycle budget)
CASES = [
    ("hello", {}, 10**6),
    ("systick", {}, 10**7),
    ("spin", {}, 10**7),
    ("timing", {}, 10**7),
    ("calls", {}, 10**7),
    ("nested", {}, 10**7),
    ("anywhere", {}, 10**7),
    ("bench", {}, 10**7),
    ("compute", {"iterations": 3}, 10**8),
    ("kernels", {"iterations": 2}, 10**8),
    ("xrsa_win", {}, 10**8),
    ("xrsa_win_sram", {}, 10**8),
    ("xrsa_opt", {}, 10**8),
    ("ecc", {}, 10**8),
    ("ecc_soft", {}, 10**8),
    ("rsacrt_checked", {}, 10**8),
    ("verifypin_hardened", {}, 10**7),
    ("ctleak", {}, 10**7),
    ("fuzz", {}, 10**7),
] + [("fault", {"fault_kind": kind, "fault_handler_mode": mode}, 10**6) for kind in range(7) for mode in (0, 1)]

# The same with flash wait states: data reads from flash and the fetch rule (counted by
# the engine's generated code on pkasim's engine, by hooks on the stock wheel).
WAIT_STATE_CASES = [c for c in CASES if c[0] in ("hello", "systick", "calls", "nested", "anywhere", "bench", "compute",
                                               "kernels", "xrsa_win", "xrsa_win_sram", "ecc_soft", "fuzz")] + [
    c for c in CASES if c[0] == "fault" and c[1]["fault_handler_mode"] == 1]

CHILD = r"""
import dataclasses, io, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine
config = load_config()
if len(sys.argv) > 3:  # flash wait states
    flash = dataclasses.replace(config.flash, wait_states=int(sys.argv[3]))
    config = dataclasses.replace(config, memory={**config.memory, "flash": flash})
out = []
for image, symbols, budget in json.loads(sys.argv[1]):
    stdout, stderr = io.BytesIO(), io.BytesIO()
    m = Machine(config, stdout=stdout, stderr=stderr)
    m.load(f"{sys.argv[2]}/{image}.elf")
    for name, value in symbols.items():
        m.write_symbol(name, value.to_bytes(4, "little"))
    r = m.run(max_cycles=budget)
    fault = r.fault
    out.append({"cycles": r.cycles, "instructions": r.instructions, "sleep": r.sleep_cycles,
                "reason": r.reason.value, "exit": r.exit_code, "message": r.message,
                "stdout": stdout.getvalue().decode(errors="replace"), "stderr": stderr.getvalue().decode(errors="replace"),
                "fault": None if fault is None else [fault.cause, fault.where, fault.instruction, fault.address,
                                                     fault.registers, fault.exception, fault.recent_blocks],
                "taken": m.exceptions_taken})
print(json.dumps({"engine": engine.selected(), "runs": out}))
"""


def _run_child(engine: str, build_dir: Path, cases: list = CASES, wait_states: int | None = None) -> dict:
    env = {**os.environ, "PKASIM_ENGINE": engine}
    extra = [] if wait_states is None else [str(wait_states)]
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases), str(build_dir), *extra], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _engine_problem() -> str | None:
    """Why pkasim's engine cannot be used here (not built, refused), or None."""
    done = subprocess.run([sys.executable, "-c", "from pkasim.native import engine; engine.require()"],
                          env={**os.environ, "PKASIM_ENGINE": "patched"}, capture_output=True, text=True, check=False)
    return done.stderr.strip().splitlines()[-1] if done.returncode else None


@pytest.fixture(scope="module")
def both_engines(build_dir: Path) -> tuple[dict, dict]:
    problem = _engine_problem()
    if problem:
        pytest.skip(f"pkasim's engine is not available here: {problem}")
    stock, patched = _run_child("stock", build_dir), _run_child("patched", build_dir)
    assert stock["engine"] == "stock" and patched["engine"] == "patched"
    return stock, patched


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{c[0]}-{'-'.join(map(str, c[1].values()))}"
                                                          for c in CASES])
def test_firmware_runs_identically_on_both_engines(both_engines, index):
    stock, patched = both_engines
    assert patched["runs"][index] == stock["runs"][index]


@pytest.fixture(scope="module")
def both_engines_wait_states(build_dir: Path) -> tuple[dict, dict]:
    problem = _engine_problem()
    if problem:
        pytest.skip(f"pkasim's engine is not available here: {problem}")
    stock = _run_child("stock", build_dir, WAIT_STATE_CASES, wait_states=2)
    patched = _run_child("patched", build_dir, WAIT_STATE_CASES, wait_states=2)
    return stock, patched


@pytest.mark.parametrize("index", range(len(WAIT_STATE_CASES)),
                         ids=[f"{c[0]}-{'-'.join(map(str, c[1].values()))}" for c in WAIT_STATE_CASES])
def test_flash_wait_states_count_identically_on_both_engines(both_engines_wait_states, index):
    stock, patched = both_engines_wait_states
    assert patched["runs"][index] == stock["runs"][index]


def test_flash_wait_states_cost_cycles_on_pkasims_engine(both_engines, both_engines_wait_states):
    """The wait-state runs are not the plain runs again (the inline count is on)."""
    plain = {(c[0], json.dumps(c[1])): r for c, r in zip(CASES, both_engines[1]["runs"])}
    for case, run in zip(WAIT_STATE_CASES, both_engines_wait_states[1]["runs"]):
        if case[0] in ("compute", "kernels"):
            assert run["cycles"] > plain[(case[0], json.dumps(case[1]))]["cycles"]


def test_unknown_engine_choice_is_a_usage_error_on_one_line(build_dir):
    env = {**os.environ, "PKASIM_ENGINE": "turbo"}
    done = subprocess.run([str(Path(sys.executable).parent / "pkasim"), "run", "-q", str(build_dir / "hello.elf")],
                          env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 64
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "PKASIM_ENGINE='turbo'" in lines[0] and "Traceback" not in done.stderr


def test_engine_from_another_patch_set_is_refused_naming_the_fix():
    if _engine_problem():
        pytest.skip("pkasim's engine is not built here")
    probe = ("import pkasim.native.engine as e; e.expected_patchset = lambda: '2.1.4+pkasim.other'; "
             "print(e.select())")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PKASIM_ENGINE": "auto"},
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "stock"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "make engine" in lines[0]


def test_failed_engine_build_warns_on_one_line_and_exits_0(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("engine_build", ROOT / "engine" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    monkeypatch.setattr(build, "OUT", tmp_path / "_engine")
    monkeypatch.setattr(build, "ROOT", tmp_path)

    def no_sdist(work, log):
        raise build.BuildFailed("pip download of the unicorn sdist failed (no network)")

    monkeypatch.setattr(build, "fetch_sdist", no_sdist)
    monkeypatch.setattr(sys, "argv", ["build.py"])
    assert build.main() == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning:") and "no network" in err[0] and "stock" in err[0]
    assert not (tmp_path / "_engine" / "libunicorn.so.2").exists()
    assert "failed" in json.loads((tmp_path / "_engine" / "engine.json").read_text())


WATCHED_RUN = """
import io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[1])
m.add_watchpoint("rsa_output", 1, "write")
hits = []
while True:
    r = m.run()
    if r.watch is None:
        break
    hits.append([m.pc, m.cycles])
print(json.dumps({"engine": engine.selected(), "hits": hits, "cycles": m.cycles, "exit": r.exit_code}))
"""


def _watched(engine_name: str, elf: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", WATCHED_RUN, str(elf)], env={**os.environ, "PKASIM_ENGINE": engine_name},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_watchpoint_leaves_the_cycle_count_unchanged_on_the_stock_wheel(build_dir):
    watched = _watched("stock", build_dir / "xrsa.elf")
    assert watched["engine"] == "stock" and watched["exit"] == 0
    assert watched["cycles"] == 21_863_845  # the count of the same run without a watchpoint (README, docs/xrsa.md)


def test_a_watchpoint_leaves_the_cycle_count_unchanged_on_both_engines(build_dir):
    problem = _engine_problem()
    if problem:
        pytest.skip(f"pkasim's engine is not available here: {problem}")
    stock, patched = _watched("stock", build_dir / "xrsa.elf"), _watched("patched", build_dir / "xrsa.elf")
    assert patched["engine"] == "patched"
    assert patched["hits"] == stock["hits"] and patched["cycles"] == stock["cycles"]


# Watchpoints on pages with hot accesses: on pkasim's engine the generated code finds
# the watched range by its address (patch 12) instead of sending the page to the slow
# path; each hit must stop at the same instruction and cycle as on the stock wheel.
# (image, symbols, watched symbol, offset, bytes, kind, flash wait states)
HOT_WATCHES = [
    ("compute", {"iterations": 2}, "compute_checksum", 0, 4, "write", 0),  # shares its page with the product
    ("compute", {"iterations": 1}, "r", 0x40, 4, "write", 0),  # a product word: written by every multiply
    ("compute", {"iterations": 1}, "a", 0x20, 4, "access", 1),  # an operand word, read and written
    ("kernels", {"iterations": 1}, "haystack", 0x10, 4, "read", 1),  # a table in flash, read with wait states
    # more watchpoints than the engine tests inline (4 per kind): the rest slow their pages
    ("compute", {"iterations": 1}, "r", [0x100, 0x140, 0x180, 0x1C0, 0x1F8], 4, "write", 0),
]

HOT_WATCH_RUN = """
import dataclasses, io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
out = []
for image, symbols, name, offset, size, kind, ws in json.loads(sys.argv[1]):
    config = load_config()
    config = dataclasses.replace(config, memory={**config.memory,
                                                 "flash": dataclasses.replace(config.flash, wait_states=ws)})
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(f"{sys.argv[2]}/{image}.elf")
    for sym, value in symbols.items():
        m.write_symbol(sym, value.to_bytes(4, "little"))
    for off in offset if isinstance(offset, list) else [offset]:
        m.add_watchpoint(m.image.symbol(name).address + off, size, kind)
    hits = []
    while len(hits) < 60:
        r = m.run(max_cycles=10**8)
        if r.watch is None:
            break
        hits.append([m.pc, m.cycles, r.watch.pc, r.watch.access])
    out.append({"hits": hits, "cycles": m.cycles, "insns": r.instructions, "exit": r.exit_code,
                "reason": r.reason.value})
print(json.dumps({"engine": engine.selected(), "runs": out}))
"""


@pytest.fixture(scope="module")
def hot_watches(build_dir: Path) -> tuple[dict, dict]:
    problem = _engine_problem()
    if problem:
        pytest.skip(f"pkasim's engine is not available here: {problem}")
    runs = []
    for engine_name in ("stock", "patched"):
        done = subprocess.run([sys.executable, "-c", HOT_WATCH_RUN, json.dumps(HOT_WATCHES), str(build_dir)],
                              env={**os.environ, "PKASIM_ENGINE": engine_name}, capture_output=True, text=True,
                              timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["engine"] for r in runs] == ["stock", "patched"]
    return runs[0], runs[1]


@pytest.mark.parametrize("index", range(len(HOT_WATCHES)),
                         ids=[f"{w[0]}-{w[2]}-{w[5]}-{i}" for i, w in enumerate(HOT_WATCHES)])
def test_a_watchpoint_on_a_page_with_hot_accesses_stops_alike_on_both_engines(hot_watches, index):
    stock, patched = hot_watches
    assert stock["runs"][index]["hits"], "the watchpoint never triggered: the case tests nothing"
    assert patched["runs"][index] == stock["runs"][index]


# A hook that writes PC inside a run (pkasim's exception entry, return and WFI wake-up do):
# the run goes on at the new PC without stopping, and a later memory hook of the same run
# still sees the PC of its own instruction (engine patches 8 and 21).
PC_WRITE_CHILD = r"""
import json
from pkasim.core import cpu  # chooses the engine (PKASIM_ENGINE) before Unicorn is used
from pkasim.native import engine
from unicorn import Uc, UC_ARCH_ARM, UC_MODE_THUMB, UC_MODE_MCLASS, UC_HOOK_CODE, UC_HOOK_MEM_READ
from unicorn import arm_const as A
code = bytes.fromhex(
    "0020"  # 0x00 movs r0, #0
    "00bf"  # 0x02 nop        <- the code hook sends PC to 0x10
    "0920"  # 0x04 movs r0, #9   (skipped)
    "fee7"  # 0x06 b .           (skipped)
    + "00bf" * 4 +
    "1168"  # 0x10 ldr r1, [r2]  <- the read hook notes PC
    "0723"  # 0x12 movs r3, #7
    "00bf"  # 0x14 nop (the end of the run)
)
uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
uc.mem_map(0, 0x1000)
uc.mem_map(0x20000000, 0x1000)
uc.mem_write(0, code)
uc.mem_write(0x20000000, (0x12345678).to_bytes(4, "little"))
uc.reg_write(A.UC_ARM_REG_R2, 0x20000000)
seen = {"writes": 0, "read_pc": []}
def jump(uc, address, size, user):
    seen["writes"] += 1
    uc.reg_write(A.UC_ARM_REG_PC, 0x10 | 1)
def read(uc, access, address, size, value, user):
    seen["read_pc"].append(uc.reg_read(A.UC_ARM_REG_PC))
uc.hook_add(UC_HOOK_CODE, jump, begin=2, end=2)
uc.hook_add(UC_HOOK_MEM_READ, read, begin=0x20000000, end=0x20000fff)
uc.emu_start(1, 0x14)
print(json.dumps({"engine": engine.selected(), "r0": uc.reg_read(A.UC_ARM_REG_R0), "r1": uc.reg_read(A.UC_ARM_REG_R1),
                  "r3": uc.reg_read(A.UC_ARM_REG_R3), "pc": uc.reg_read(A.UC_ARM_REG_PC), **seen}))
"""


@pytest.mark.parametrize("choice", ["stock", "patched"])
def test_a_pc_written_from_a_hook_goes_on_in_the_same_run(choice):
    if choice == "patched" and _engine_problem():
        pytest.skip(f"pkasim's engine is not available here: {_engine_problem()}")
    done = subprocess.run([sys.executable, "-c", PC_WRITE_CHILD], env={**os.environ, "PKASIM_ENGINE": choice},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert (got["engine"], got["writes"], got["r0"], got["r1"], got["r3"], got["pc"], got["read_pc"]) == (
        choice, 1, 0, 0x12345678, 7, 0x14, [0x10])


# The stock wheel's r0-r14 as the native hooks read them in place (pkasim.native.stockregs),
# against the engine's own register reads: after a run that stopped mid-program, and
# after a write through the debugger API.
IN_PLACE_RUN = r"""
import ctypes, json, sys
from pkasim.chip.config import load_config
from pkasim.core.machine import Machine
from pkasim.native import engine
m = Machine(load_config())
m.load(sys.argv[1])
m.write_symbol("iterations", (2).to_bytes(4, "little"))
m.run(max_cycles=100_000)
names = [f"r{i}" for i in range(13)] + ["sp", "lr"]
ptr = m.core.state.regs_ptr
view = lambda: list((ctypes.c_uint32 * 15).from_address(ptr)) if ptr else None
after_run = [view(), [m.core.reg(n) for n in names]]
m.core.set_reg("r5", 0x1234567)
m.core.set_reg("lr", 0xFFFFFFF9)
print(json.dumps({"engine": engine.selected(), "after_run": after_run,
                  "after_write": [view(), [m.core.reg(n) for n in names]]}))
"""


def test_the_stock_wheels_registers_read_in_place_are_the_engines_registers(build_dir):
    got = on_stock_wheel(IN_PLACE_RUN, build_dir / "kernels.elf")
    assert got["after_run"][0] == got["after_run"][1] and got["after_write"][0] == got["after_write"][1]


# A run cut into pieces: cycle budgets (the native hook stops at a block start and
# drops the record it has committed), single steps (the run loop commits part of a
# block and drops its record) and debugger PC writes (the record is dropped). On
# pkasim's engine the generated code adds the record's cost and instructions at the
# next block start without testing whether it is valid (patch 18), so a dropped
# record must hold none: anything left would be counted twice.
STOP_RESUME_RUN = """
import io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
def machine():
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(sys.argv[1])
    return m
whole = machine()
w = whole.run()
m = machine()
stops = 0
while True:
    r = m.run(max_cycles=9_973)
    if r.reason.value != "budget":
        break
    stops += 1
    if stops % 2:
        m.step()
    if stops % 3 == 0:
        m.set_reg("pc", m.pc)
print(json.dumps({"engine": engine.selected(), "stops": stops,
                  "whole": [w.cycles, w.instructions, w.exit_code, whole.stdout.getvalue().decode()],
                  "pieces": [r.cycles, r.instructions, r.exit_code, m.stdout.getvalue().decode()]}))
"""


@pytest.mark.parametrize("engine_name", ["stock", "patched"])
def test_a_run_stopped_and_resumed_counts_what_one_run_counts(build_dir, engine_name):
    if engine_name == "patched" and (problem := _engine_problem()):
        pytest.skip(f"pkasim's engine is not available here: {problem}")
    done = subprocess.run([sys.executable, "-c", STOP_RESUME_RUN, str(build_dir / "kernels.elf")],
                          env={**os.environ, "PKASIM_ENGINE": engine_name}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["engine"] == engine_name and out["stops"] > 50
    assert out["pieces"] == out["whole"]
