"""Debian's gdb-multiarch against ``pkasim gdbserver``, in batch mode: the session a
user has (break at rsa_private, registers, the key in memory, a watchpoint, stepping
forwards and backwards, detach), with gdb's output checked against the machine."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from gdbserver_util import Server

from pkasim.core.results import StopReason

GDB = shutil.which("gdb-multiarch")
pytestmark = pytest.mark.skipif(GDB is None, reason="gdb-multiarch is not installed (.ci/run installs it)")


def gdb_batch(elf_path, port: int, commands: list[str]) -> str:
    argv = [GDB, "-batch", "-nx", "-ex", "set pagination off", "-ex", "set confirm off",
            "-ex", f"target remote 127.0.0.1:{port}"]
    for c in commands:
        argv += ["-ex", c]
    proc = subprocess.run([*argv, str(elf_path)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    return proc.stdout + proc.stderr


def values(out: str, name: str) -> list[str]:
    """Every '$N = VALUE' gdb printed, in order (name is only for the message)."""
    found = re.findall(r"^\$\d+ = (.*)$", out, re.M)
    assert found, f"gdb printed no value for {name}:\n{out}"
    return found


def cycles(out: str) -> list[int]:
    return [int(c.replace(",", "")) for c in re.findall(r"^cycles ([\d,]+) \(", out, re.M)]


@pytest.fixture(scope="module")
def reference(elf, config):
    """What the machine itself says: the key, and the first write that changes
    rsa_output[0] (PC after it and the cycle count there)."""
    import io

    from pkasim.core.machine import Machine

    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(elf("xrsa"))
    key = m.read_symbol("rsa_input_key", initial=True)[:32]  # what the startup code copies
    m.add_watchpoint("rsa_output", 1, "write")
    while True:
        r = m.run()
        assert r.reason == StopReason.WATCHPOINT
        if r.watch.new != r.watch.old:
            break
    return {"key": [int.from_bytes(key[i:i + 4], "little") for i in range(0, 32, 4)],
            "watch_pc": m.pc, "watch_cycles": m.cycles, "new": r.watch.new[0], "old": r.watch.old[0],
            "write_pc": r.watch.pc}


@pytest.fixture(scope="module")
def session(elf, reference):
    server = Server(elf("xrsa"))
    try:
        out = gdb_batch(elf("xrsa"), server.port, [
            "break rsa_private", "continue", "info registers", "x/8wx key",
            "watch rsa_output[0]", "continue", "p/x $pc", "monitor cycles",
            "stepi", "p/x $pc", "reverse-stepi", "p/x $pc", "monitor cycles",
            "reverse-stepi", "p/x $pc", "monitor cycles",
            "finish", "reverse-continue", "p/x $pc", "monitor cycles", "detach"])
        status, err = server.wait()
    finally:
        server.close()
    return out, status, err


def test_gdb_stops_at_the_breakpoint_on_rsa_private(session):
    out, _, _ = session
    assert re.search(r"^Breakpoint 1, rsa_private \(key=0x[0-9a-f]+ <rsa_input_key>", out, re.M), out


def test_info_registers_shows_the_m_profile_registers(session):
    out, _, _ = session
    for reg in ["r0", "r12", "sp", "lr", "pc", "xpsr", "msp", "psp", "primask", "control"]:
        assert re.search(rf"^{reg}\s+0x[0-9a-f]+", out, re.M), f"{reg} missing:\n{out}"
    assert re.search(r"^pc\s+0x[0-9a-f]+\s+0x[0-9a-f]+ <rsa_private\+\d+>", out, re.M)


def test_x_shows_the_key_as_the_machine_holds_it(session, reference):
    out, _, _ = session
    words = re.findall(r"^0x2[0-9a-f]+ <rsa_input_key(?:\+\d+)?>:\s+(.*)$", out, re.M)
    shown = [int(w, 16) for line in words for w in line.split()]
    assert shown == reference["key"]


def test_a_watchpoint_stops_after_the_write_with_old_and_new_values(session, reference):
    out, _, _ = session
    assert "Hardware watchpoint 2: rsa_output[0]" in out
    assert re.search(rf"Old value = {reference['old']} .*\nNew value = {reference['new']} ", out), out
    pcs = values(out, "$pc")
    assert int(pcs[0], 16) == reference["watch_pc"]
    assert cycles(out)[0] == reference["watch_cycles"]


def test_stepi_then_reverse_stepi_come_back_to_the_same_instruction_and_cycle(session, reference):
    out, _, _ = session
    pcs = [int(v, 16) for v in values(out, "$pc")]
    assert pcs[1] > pcs[0] and pcs[2] == pcs[0]
    assert cycles(out)[1] == reference["watch_cycles"]


def test_reverse_stepi_over_the_write_lands_before_it(session, reference):
    out, _, _ = session
    pcs = [int(v, 16) for v in values(out, "$pc")]
    assert pcs[3] == reference["write_pc"]
    assert cycles(out)[2] < reference["watch_cycles"]


def test_detach_ends_the_session_and_the_server(session):
    out, status, err = session
    assert "[Inferior 1 (Remote target) detached]" in out
    assert status == 0 and "gdb disconnected" in err


def test_reverse_continue_goes_back_to_the_watched_write(session, reference):
    out, _, _ = session
    pcs = [int(v, 16) for v in values(out, "$pc")]
    assert re.search(rf"Old value = {reference['new']} .*\nNew value = {reference['old']} ", out), out
    assert pcs[4] == reference["write_pc"]
    assert cycles(out)[3] == cycles(out)[2]


def positions(out: str) -> list[tuple[int, int]]:
    """(cycles, instructions) of each 'monitor cycles' answer."""
    return [(int(c.replace(",", "")), int(n.replace(",", "")))
            for c, n in re.findall(r"^cycles ([\d,]+) \(.*\), instructions ([\d,]+),", out, re.M)]


@pytest.fixture(scope="module")
def loop(elf, config):
    """rsa_soft.elf stopped by a run at bn_muladdc_thumb's loop branch, whose target
    block the run has translated: the instruction before it and the two after, as a
    fresh run executes them (address, cycle it starts, instruction number)."""
    import io

    from stepping_util import loop_branch, passes, starts_after

    from pkasim.core.machine import Machine

    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(elf("rsa_soft"))
    addr = loop_branch(m)
    m.add_breakpoint(addr)
    before = passes(m, addr - 2, 10**8)  # the loop's `beq`, which falls through to the branch
    assert m.pc == addr
    m.remove_breakpoint(addr)
    n, cycle, _ = before[-1]
    return addr, [(addr - 2, cycle, n)] + [(a, c, k) for k, c, a in starts_after(m, 40)[:3]]


def test_gdb_stepi_after_continue_executes_one_instruction_and_reverse_stepi_undoes_it(elf, loop):
    addr, ((pc_before, *before), at, after, then) = loop
    server = Server(elf("rsa_soft"))
    try:
        out = gdb_batch(elf("rsa_soft"), server.port, [
            f"break *0x{addr:x}", "continue", "monitor cycles", "delete",
            "stepi", "p/x $pc", "monitor cycles", "stepi", "p/x $pc", "monitor cycles",
            "reverse-stepi", "reverse-stepi", "p/x $pc", "monitor cycles",
            "reverse-stepi", "p/x $pc", "monitor cycles", "detach"])
        server.wait()
    finally:
        server.close()
    pcs = [int(v, 16) for v in values(out, "$pc")]
    assert pcs == [after[0], then[0], addr, pc_before], out
    assert positions(out) == [tuple(x[1:]) for x in (at, after, then, at)] + [tuple(before)], out
