"""``pkasim debug --commands``: the engine with plain text output (docs/debugger.md).
The numbers it prints are checked against the Machine API run alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pkasim.debugger.engine import Debugger

PKASIM = Path(sys.executable).with_name("pkasim")
SCRIPT = """\
break rsa_private
continue
step
next
watch rsa_output
continue
continue
x/1wx {word:#x}
reverse-stepi
x/1wx {word:#x}
info registers
stepi
delete 2
finish
"""


def answers(output: str) -> dict[str, list[str]]:
    """Each command's answer lines, in order (a repeated command gets a #n suffix)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith("(pkasim) "):
            current = line[9:]
            n = 2
            while current in out:
                current = f"{line[9:]} #{n}"
                n += 1
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


def cycles_in(lines: list[str]) -> int:
    text = next(ln for ln in lines if ln.startswith("cycles "))
    return int(re.match(r"cycles ([\d,]+)", text).group(1).replace(",", ""))


@pytest.fixture(scope="module")
def session(elf, tmp_path_factory, config):
    import io

    from pkasim.core.machine import Machine

    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(elf("xrsa"))
    sym = m.image.symbol("rsa_output")
    m.run(until="rsa_private")  # the script sets the watchpoint inside rsa_private (startup zeroes it before)
    m.add_watchpoint("rsa_output")
    m.run()
    r = m.run()  # the script's second continue: the second write to rsa_output
    assert r.reason.value == "watchpoint"
    hit = r.watch
    changed = next(i for i, (a, b) in enumerate(zip(hit.old, hit.new)) if a != b)
    script = tmp_path_factory.mktemp("dbg") / "script.txt"
    word = sym.address + changed - (sym.address + changed) % 4
    script.write_text(SCRIPT.format(word=word))
    proc = subprocess.run([str(PKASIM), "debug", str(elf("xrsa")), "--commands", str(script)],
                          capture_output=True, text=True, timeout=600)
    return proc, answers(proc.stdout), hit, word, sym


def test_scripted_mode_exits_0_when_every_command_ran(session):
    proc, *_ = session
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_break_stops_at_rsa_private_with_the_cycles_of_a_plain_run(session, make_machine, elf):
    _, out, *_ = session
    plain = make_machine()
    plain.load(elf("xrsa"))
    plain.run(until="rsa_private")
    assert out["break rsa_private"][0].startswith("Breakpoint 1 at 0x")
    assert out["continue"][0].startswith(f"Breakpoint 1, 0x{plain.pc:08x} in rsa_private at rsa.c:")
    assert cycles_in(out["continue"]) == plain.cycles


def test_step_goes_to_the_next_source_line_and_next_over_calls(session):
    _, out, *_ = session
    assert "rsa.c:410" in out["step"][0]
    assert cycles_in(out["step"]) > cycles_in(out["continue"])
    assert cycles_in(out["next"]) > cycles_in(out["step"])
    assert not any("rsa.c:410" in ln for ln in out["next"][:1])


def test_watch_stops_after_the_write_and_reverse_step_goes_back_before_it(session):
    _, out, hit, word, _ = session
    stop = out["continue #3"]
    assert stop[0].startswith("Watchpoint 2: rsa_output: write by ")
    assert f"new 0x{hit.new[word - hit.watchpoint.address:][:4][::-1].hex()}" in stop[0]
    assert cycles_in(stop) == hit_cycles(session)
    new_word = int(out[f"x/1wx {word:#x}"][0].split()[-1], 16)
    old_word = int(out[f"x/1wx {word:#x} #2"][0].split()[-1], 16)
    assert new_word != old_word
    assert old_word == int.from_bytes(hit.old[word - hit.watchpoint.address:][:4], "little")
    back = out["reverse-stepi"]
    assert back[0].startswith(f"0x{hit.pc:08x} in ")  # at the store again, before it executed
    assert cycles_in(back) < cycles_in(stop)
    regs = " ".join(out["info registers"])
    assert f"pc {hit.pc:08x}" in regs
    assert cycles_in(out["stepi"]) == cycles_in(stop)  # forward again: the same cycle count


def hit_cycles(session) -> int:
    return cycles_in(session[1]["continue #3"])


def test_finish_returns_to_main_with_the_result(session, make_machine, elf):
    _, out, *_ = session
    fin = out["finish"]
    assert fin[0] == "Run till exit from rsa_private"
    assert "in main" in fin[1]
    assert fin[-1] == "Value returned: r0 = 0x00000000 (0)"


def test_commands_come_from_stdin_when_it_is_not_a_terminal(elf):
    proc = subprocess.run([str(PKASIM), "debug", str(elf("xrsa"))], input="stepi\nprint $pc\nbogus\n",
                          capture_output=True, text=True, timeout=120)
    out = answers(proc.stdout)
    assert out["stepi"][-1].startswith("cycles ")
    assert out["print $pc"][0].startswith("$pc = ")
    assert out["bogus"] == ["error: unknown command 'bogus' (try 'help')"]
    assert proc.returncode == 64  # a refused command: not a clean run


def test_a_missing_command_file_is_one_line_and_exit_66(elf, tmp_path):
    proc = subprocess.run([str(PKASIM), "debug", str(elf("xrsa")), "--commands", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 66
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_print_evaluates_registers_symbols_and_memory(make_machine, elf):
    m = make_machine()
    m.load(elf("xrsa"))
    d = Debugger(m, reverse=False)
    sp = m.reg("sp")
    assert d.execute("print $sp + 4") == [f"$sp + 4 = {sp + 4} (0x{sp + 4:08x})"]
    addr = m.image.symbol("rsa_output").address
    assert d.execute("print/x &rsa_output") == [f"&rsa_output = 0x{addr:x}"]
    assert d.execute("print *0")[0] == f"*0 = {m.read_u32(0)} (0x{m.read_u32(0):08x})"
    assert d.execute("print (1 << 4) | 3 * 2") == ["(1 << 4) | 3 * 2 = 22 (0x00000016)"]
    assert d.execute("print nosuch")[0].startswith("error: no register or symbol named 'nosuch'")


def test_break_at_file_and_line_uses_the_line_table(make_machine, elf):
    m = make_machine()
    m.load(elf("xrsa"))
    d = Debugger(m, reverse=False)
    assert d.execute("break rsa.c:410")[0].startswith("Breakpoint 1 at ")
    out = d.execute("continue")
    assert out[0].startswith("Breakpoint 1, ") and "rsa.c:410" in out[0]


def test_reverse_commands_say_so_when_reverse_execution_is_off(make_machine, elf):
    m = make_machine()
    m.load(elf("xrsa"))
    d = Debugger(m, reverse=False)
    assert d.execute("reverse-stepi") == ["error: reverse execution is off (started with --no-reverse)"]


def test_after_the_firmware_exits_only_going_back_runs(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    d = Debugger(m)
    assert d.execute("continue")[0] == "The firmware exited with code 0"
    assert d.execute("stepi")[0].startswith("error: the firmware exited with code 0: nothing runs from here")
    assert d.execute("reverse-stepi")[-1].startswith("cycles ")
    assert d.execute("stepi")[0] == "The firmware exited with code 0"


def test_a_fault_stops_at_the_handlers_bkpt_with_the_fault_reported(make_machine, elf):
    m = make_machine()
    m.load(elf("fault"))
    m.write_symbol("fault_kind", (1).to_bytes(4, "little"))  # an unaligned LDR
    m.reset()
    d = Debugger(m)
    out = d.execute("continue")
    assert out[0].startswith("Stopped: BKPT #0 at hardfault_report")
    fault_insn = m.image.symbol("fault_insn_1").address & ~1
    assert out[1].startswith("Fault: unaligned access to 0x") and f"at 0x{fault_insn:08x}" in out[1]
    bt = d.execute("bt")
    assert "<exception entry>" in bt[1] and f"0x{fault_insn:08x}" in bt[1]


def test_reverse_step_goes_back_to_the_start_of_each_previous_line(make_machine, elf):
    m = make_machine()
    m.load(elf("xrsa"))
    d = Debugger(m)
    d.execute("break rsa_private")
    d.execute("continue")
    stops = [(m.pc, m.cycles)]
    for _ in range(3):
        d.execute("next")
        stops.append((m.pc, m.cycles))
    for expected in reversed(stops[:-1]):
        d.execute("reverse-step")
        assert (m.pc, m.cycles) == expected


def test_an_interrupt_ends_a_run_between_its_slices(make_machine, elf):
    m = make_machine()
    m.load(elf("xrsa"))
    d = Debugger(m, interval_cycles=100_000)
    d.interrupted = lambda: True  # the TUI's Ctrl-C
    assert d.execute("continue")[0] == "Interrupted"
    assert 100_000 <= m.cycles < 100_100  # the end of the first slice (a block boundary)


@pytest.mark.parametrize(("line", "phrase"), [
    ("stack x", "stack N: N words: expected a whole number, got 'x'"),
    ("stack 99999999999999999999", "stack N: N words: expected 1 to 4096, got 99999999999999999999"),
    ("delete x", "delete N...: breakpoint numbers: expected a whole number, got 'x'"),
])
def test_a_count_that_is_not_a_number_is_an_error_line(make_machine, elf, line, phrase):
    """Once ValueError, an internal error (exit 70) in scripted mode."""
    m = make_machine()
    m.load(elf("hello"))
    assert Debugger(m, reverse=False).execute(line) == [f"error: {phrase}"]


def test_delete_takes_hex_numbers_too(make_machine, elf):
    m = make_machine()
    m.load(elf("hello"))
    d = Debugger(m, reverse=False)
    d.execute("break main")
    assert d.execute("delete 0x1") == ["Deleted 1"]
