"""pkasim faults (emulator/analysis/faults, emulator/cli/faults.py; docs/faults.md).

A fault model that changes nothing reproduces the golden run exactly (cycles, output,
exit code), also across PKA interrupts; the unprotected VerifyPIN falls to a single
skip, the hardened one does not; a corrupted PKA result in the RSA-CRT recombination
gives a signature that factors N, and verify-after-sign catches every one. The space,
its keys and pairs are exact; the database resumes a campaign; the JSON, export,
replay and Tarmac outputs are there; bad input gets one line and its exit code.

Campaigns are kept small (short windows, samples): the full tables are in docs/faults.md.
"""

from __future__ import annotations

import io
import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim.analysis.faults import Setup, parse_key, run_campaign
from pkasim.analysis.faults.campaign import pair, prepared
from pkasim.analysis.faults.oracles import BellcoreOracle, RunOutcome
from pkasim.cli.main import main
from pkasim.core.machine import Machine, StopReason
from pkasim.core.snapshot import LogArchive, capture, restore
from pkasim.peripherals.pka import StartFault
from pkasim.rsa.rsakey import RsaKey


def setup_of(config, path, **kw) -> Setup:
    return Setup(str(path), path.read_bytes(), config, **kw)


def faults(capsys, tmp_path, *argv: str) -> tuple[int, str, str]:
    """`pkasim faults ARGV --db tmp`: exit code, stdout, stderr."""
    code = main(["faults", *argv, "--db", str(tmp_path / "faults.sqlite")])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------- the machine's hooks

def test_conditional_breakpoint_stops_before_the_instruction_with_that_number(make_machine, elf):
    m = make_machine()
    m.load(elf("verifypin_hardened"))
    seen = []
    hook = m.on_instructions(0, 0xFFFFFFFF, lambda a, s, c, n: seen.append((n, a)))
    m.run()
    m.remove_instruction_hook(hook)
    address = max({a for _, a in seen}, key=lambda a: sum(x == a for _, x in seen))  # the busiest, in a loop
    target = [n for n, a in seen if a == address][1]  # its second pass
    m.load(elf("verifypin_hardened"))
    m.add_breakpoint(address, lambda cycle, number: number == target)
    r = m.run()
    assert (r.reason, m.pc, m.instructions) == (StopReason.BREAKPOINT, address, target)


def test_skip_moves_past_the_instruction_as_a_one_cycle_nop(make_machine, elf):
    m = make_machine()
    m.load(elf("verifypin"))
    pc, cycles, insns = m.pc, m.cycles, m.instructions
    m.skip(2)
    assert (m.pc, m.cycles, m.instructions) == (pc + 4, cycles + 2, insns + 2)


def test_pka_start_fault_corrupts_one_result_and_disarms(make_machine, elf):
    m = make_machine()
    m.load(elf("rsacrt"))
    golden = m.run()
    first = m.peripherals["pka"].log[0]
    m.load(elf("rsacrt"))
    pka = m.peripherals["pka"]
    pka.arm_fault(StartFault(first.start_cycle, corrupt=lambda result, words: result ^ 1))
    faulty = m.run()
    assert pka.faults == () and faulty.exit_code == 0 and m.stdout.getvalue() != b""
    assert faulty.cycles == golden.cycles  # the same work, a different result


def test_snapshot_taken_asleep_during_a_pka_operation_restores_the_same_run(elf, config):
    out = io.BytesIO()
    m = Machine(config, stdout=out, stderr=io.BytesIO())
    m.load(elf("rsacrt"))
    m.run(max_cycles=2_000_000)
    assert m.peripherals["pka"].busy
    snap = capture(m, LogArchive())
    m.run()
    golden, cycles = out.getvalue(), m.cycles
    out.seek(0)
    out.truncate()
    restore(m, snap)
    m.run()
    assert (out.getvalue(), m.cycles) == (golden[len(golden) - len(out.getvalue()):], cycles)


# ---------------------------------------------------------------------- the golden run, bit for bit

def test_null_model_reproduces_the_golden_run_at_every_instruction(config, elf):
    result = run_campaign(setup_of(config, elf("verifypin"), models=("none",), oracles=("exit=0",)))
    g = result.golden
    assert len(result.rows) == g.result.instructions
    assert {(r["outcome"], r["cycles"], r["exit_code"]) for r in result.rows} == {("no-effect", g.result.cycles, 1)}


def test_null_model_reproduces_the_golden_run_across_pka_interrupts(config, elf):
    result = run_campaign(setup_of(config, elf("rsacrt"), window="crt_recombine", models=("none",),
                                   oracles=("rsa-crt-bellcore",)), sample=40, seed=3)
    g = result.golden
    assert {(r["outcome"], r["cycles"]) for r in result.rows} == {("no-effect", g.result.cycles)}


def test_masked_fault_stops_at_the_first_equal_golden_state(config, elf):
    result = run_campaign(setup_of(config, elf("rsacrt"), window="crt_half#1", models=("none",),
                                   oracles=("rsa-crt-bellcore",)), sample=5, seed=1)
    assert {r["reason"] for r in result.rows} == {"masked"}


# ---------------------------------------------------------------------- the demo firmware

def test_unprotected_verifypin_falls_to_a_single_skip(config, elf):
    result = run_campaign(setup_of(config, elf("verifypin"), window="verify_pin", models=("skip",),
                                   oracles=("exit=0",), detected=("exit=3",)))
    assert result.summary.outcomes["exploitable"] > 0


def test_hardened_verifypin_detects_skips_and_no_single_skip_authenticates(config, elf):
    result = run_campaign(setup_of(config, elf("verifypin_hardened"), window="verify_pin", models=("skip",),
                                   oracles=("exit=0",), detected=("exit=3",)))
    assert result.summary.outcomes["exploitable"] == 0 and result.summary.outcomes["detected"] > 0


def test_corrupted_pka_result_in_the_recombination_factors_n(config, elf):
    result = run_campaign(setup_of(config, elf("rsacrt"), window="crt_recombine", models=("pka-result:zero",),
                                   oracles=("rsa-crt-bellcore",)))
    assert result.summary.outcomes["exploitable"] > 0


def test_verify_after_sign_detects_every_corrupted_pka_result(config, elf):
    result = run_campaign(setup_of(config, elf("rsacrt_checked"), window="crt_recombine",
                                   models=("pka-result:zero",), oracles=("rsa-crt-bellcore",), detected=("exit=3",)))
    assert result.summary.outcomes["exploitable"] == 0
    assert result.summary.outcomes["detected"] > 0 and result.summary.outcomes["corrupted"] == 0


# ---------------------------------------------------------------------- oracles, keys, the space

@pytest.fixture(scope="module")
def demo_key(repo) -> RsaKey:
    return RsaKey.load_pem(repo / "firmware" / "keys" / "demo-2048.pem")


def outcome_with(key: RsaKey, m: int, s: int) -> RunOutcome:
    memory = {"rsa_input_key": key.pack(), "rsa_input_msg": m.to_bytes(256, "big"), "rsa_output": s.to_bytes(256, "big")}
    addresses = {name: (i << 16, len(data)) for i, name_data in enumerate(memory.items()) for name, data in [name_data]}

    def read(address: int, size: int) -> bytes:
        data = list(memory.values())[address >> 16]
        return data[address & 0xFFFF:(address & 0xFFFF) + size]

    return RunOutcome("exit", 0, "", 0, 0, b"", b"", 0, reader=read, symbols=addresses.__getitem__)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(min_value=2, max_value=2**2000), error=st.integers(min_value=1, max_value=2**1000))
def test_bellcore_oracle_factors_n_from_a_signature_wrong_mod_q_only(demo_key, m, error):
    d = demo_key.d
    sp = pow(m, d % (demo_key.p - 1), demo_key.p)
    sq = (pow(m, d % (demo_key.q - 1), demo_key.q) + error) % demo_key.q  # the q half is wrong
    if (sq - pow(m, d % (demo_key.q - 1), demo_key.q)) % demo_key.q == 0:
        return
    h = pow(demo_key.q, -1, demo_key.p) * (sp - sq) % demo_key.p
    faulty = sq + h * demo_key.q
    golden = outcome_with(demo_key, m, demo_key.private(m))
    assert BellcoreOracle()(golden, outcome_with(demo_key, m, faulty))


def test_bellcore_oracle_rejects_the_correct_signature(demo_key):
    m = 0x1234567
    s = demo_key.private(m)
    assert not BellcoreOracle()(outcome_with(demo_key, m, s), outcome_with(demo_key, m, s))


@settings(max_examples=50, deadline=None)
@given(n=st.integers(min_value=2, max_value=400), data=st.data())
def test_pair_index_names_each_pair_once_in_order(n, data):
    p = data.draw(st.integers(min_value=0, max_value=n * (n - 1) // 2 - 1))
    i, j = pair(p, n)
    assert 0 <= i < j < n and i * n - i * (i + 1) // 2 + (j - i - 1) == p


def test_every_fault_key_names_its_fault(config, elf):
    golden, space, _ = prepared(setup_of(config, elf("verifypin"), models=(
        "skip", "skip:3", "instr-flip", "reg-flip", "reg-zero", "reg-ones", "flag-flip", "load-flip"), oracles=("exit=0",)))
    assert all(parse_key(space[i].key) == space[i] for i in range(len(space)))


def test_window_by_source_lines_holds_only_those_lines(config, elf, repo):
    source = (repo / "firmware" / "images" / "verifypin.c").read_text().splitlines()
    line = max(i + 1 for i, text in enumerate(source) if text.strip() == "g_ptc--;")  # VerifyPIN_0's
    golden, space, _ = prepared(setup_of(config, elf("verifypin"), window=f"verifypin.c:{line}", models=("skip",),
                                         oracles=("exit=0",)))
    assert len(space) > 0 and {golden.where(pc)["line"] for pc in golden.pcs} == {line}


def test_window_by_cycles_holds_the_instructions_starting_there(config, elf):
    golden, _, _ = prepared(setup_of(config, elf("verifypin"), window="cycles:50-80", models=("skip",),
                                     oracles=("exit=0",)))
    assert min(golden.cycles) >= 50 and max(golden.cycles) <= 80


# ---------------------------------------------------------------------- the command

def test_command_exits_1_when_a_fault_is_exploitable(capsys, tmp_path, elf):
    code, _, _ = faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "verify_pin", "-o", "exit=0", "-q")
    assert code == 1


def test_fail_on_never_exits_0(capsys, tmp_path, elf):
    code, _, _ = faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "verify_pin", "-o", "exit=0", "-q",
                        "--fail-on", "never")
    assert code == 0


def test_json_holds_the_schema_every_fault_and_the_summary(capsys, tmp_path, elf):
    code, out, _ = faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "verify_pin", "-o", "exit=0",
                          "-q", "--json", "-")
    doc = json.loads(out)
    assert doc["schema"] == "pkasim.faults/1" and len(doc["faults"]) == sum(doc["summary"].values()) == doc["space"]
    assert {"model", "cycle", "pc", "function", "file", "line", "instruction", "outcome"} <= set(doc["faults"][0])


def test_rerun_takes_stored_faults_from_the_database(capsys, tmp_path, elf):
    argv = (str(elf("verifypin")), "-m", "reg-flip", "-w", "verify_pin", "-o", "exit=0", "--sample", "60",
            "--json", str(tmp_path / "a.json"))
    faults(capsys, tmp_path, *argv)
    db = sqlite3.connect(tmp_path / "faults.sqlite")
    db.execute("DELETE FROM faults WHERE id % 3 = 0")
    db.commit()
    kept = db.execute("SELECT count(*) FROM faults").fetchone()[0]
    db.close()
    _, _, err = faults(capsys, tmp_path, *argv[:-1], str(tmp_path / "b.json"))
    first, second = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert f"{kept} of 60 faults already in" in err
    assert [(f["key"], f["outcome"]) for f in first["faults"]] == [(f["key"], f["outcome"]) for f in second["faults"]]


def test_order_2_prints_the_number_of_pairs_before_it_starts(capsys, tmp_path, elf):
    code, _, err = faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "byteArrayCompare", "-o",
                          "exit=0", "--order", "2", "--sample", "20", "--fail-on", "never")
    n = int(err.split("order 2: ")[1].split(" single")[0].replace(",", ""))
    assert f"make {n * (n - 1) // 2:,} pairs" in err and code == 0


def test_local_processes_give_the_outcomes_of_one_process(capsys, tmp_path, elf):
    base = (str(elf("verifypin")), "-m", "skip", "-m", "flag-flip", "-o", "exit=0", "-q", "--fail-on", "never")
    faults(capsys, tmp_path, *base, "--json", str(tmp_path / "one.json"))
    (tmp_path / "faults.sqlite").unlink()
    faults(capsys, tmp_path, *base, "--jobs", "2", "--json", str(tmp_path / "two.json"))
    one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert [(f["key"], f["outcome"], f["cycles"]) for f in one["faults"]] == \
        [(f["key"], f["outcome"], f["cycles"]) for f in two["faults"]]


def test_export_writes_one_csv_row_per_fault(capsys, tmp_path, elf):
    out = tmp_path / "rows.csv"
    _, doc, _ = faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "verify_pin", "-o", "exit=0", "-q",
                       "--export", str(out), "--json", "-")
    lines = out.read_text().splitlines()
    assert lines[0].startswith('"id","key","model"') and len(lines) - 1 == len(json.loads(doc)["faults"])


def test_plugin_oracle_that_raises_marks_oracle_error_and_the_campaign_goes_on(capsys, tmp_path, elf, monkeypatch):
    (tmp_path / "picky.py").write_text(
        "def oracle(golden, faulted):\n"
        "    if faulted.exit_code != golden.exit_code:\n"
        "        raise ValueError('cannot judge')\n"
        "    return False\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "verify_pin", "-o",
                          "picky:oracle", "-q", "--json", "-")
    summary = json.loads(out)["summary"]
    assert code == 0 and summary["oracle-error"] > 0 and summary["no-effect"] > 0


def test_replay_stops_just_after_the_injection(capsys, tmp_path, elf):
    faults(capsys, tmp_path, str(elf("verifypin")), "-m", "reg-zero", "-w", "verify_pin", "-o", "exit=0", "-q",
           "--fail-on", "never", "--json", str(tmp_path / "r.json"))
    fault = json.loads((tmp_path / "r.json").read_text())["faults"][0]
    script = tmp_path / "cmds"
    script.write_text(f"print ${fault['detail']}\n")
    code, out, err = faults(capsys, tmp_path, "--replay", str(fault["id"]), "--commands", str(script))
    assert code == 0 and "stopped just after the injection" in err and "= 0" in out


def test_replay_tarmac_writes_the_golden_and_the_faulted_trace(capsys, tmp_path, elf):
    faults(capsys, tmp_path, str(elf("verifypin")), "-m", "skip", "-w", "verify_pin", "-o", "exit=0", "-q",
           "--json", str(tmp_path / "r.json"))
    fault = next(f for f in json.loads((tmp_path / "r.json").read_text())["faults"] if f["outcome"] == "exploitable")
    code, _, _ = faults(capsys, tmp_path, "--replay", str(fault["id"]), "--tarmac", str(tmp_path / "t"))
    golden = (tmp_path / "t" / "golden.tarmac").read_text().splitlines()
    faulty = (tmp_path / "t" / f"fault-{fault['id']}.tarmac").read_text().splitlines()
    assert code == 0 and golden and faulty and golden != faulty


# ---------------------------------------------------------------------- bad input

@pytest.mark.parametrize("argv, code, words", [
    (("-m", "laser", "-o", "exit=0"), 64, "unknown fault model 'laser'"),
    (("-m", "skip", "-o", "magic"), 64, "--oracle 'magic'"),
    (("-m", "skip", "-o", "exit=0", "-w", "no_such_function"), 65, "no function named 'no_such_function'"),
    (("-m", "skip", "-o", "exit=0", "-w", "cycles:100000-200000"), 64, "before the window starts"),
    (("-m", "skip", "-o", "exit=0", "-w", "verify_pin", "--sample", "1000"), 64, "larger than the fault space"),
    (("-m", "skip", "-o", "no_such_module:oracle"), 66, "no module named 'no_such_module'"),
    (("-m", "skip", "-o", "json:no_such_function"), 64, "has no function 'no_such_function'"),
    (("-m", "skip", "-o", "exit=1"), 64, "already holds on the run without a fault"),
    (("-m", "skip", "-o", "exit=0", "-w", "verify_pin#2"), 64, "called once"),
    (("-m", "pka-skip", "-o", "exit=0", "-w", "verify_pin"), 64, "no fault of these models"),
])
def test_bad_input_gets_one_line_and_its_exit_code(capsys, tmp_path, elf, argv, code, words):
    got, _, err = faults(capsys, tmp_path, str(elf("verifypin")), *argv)
    assert got == code and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_firmware_exits_66(capsys, tmp_path):
    got, _, err = faults(capsys, tmp_path, str(tmp_path / "none.elf"), "-m", "skip", "-o", "exit=0")
    assert got == 66 and len(err.strip().splitlines()) == 1


def test_dask_cluster_gives_the_outcomes_of_one_process(capsys, tmp_path, elf):
    distributed = pytest.importorskip("distributed")
    base = (str(elf("verifypin")), "-m", "skip", "-o", "exit=0", "-q", "--fail-on", "never")
    faults(capsys, tmp_path, *base, "--json", str(tmp_path / "one.json"))
    (tmp_path / "faults.sqlite").unlink()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        faults(capsys, tmp_path, *base, "--scheduler", cluster.scheduler_address, "--json", str(tmp_path / "d.json"))
    one, dask = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "d"))
    assert [(f["key"], f["outcome"]) for f in one["faults"]] == [(f["key"], f["outcome"]) for f in dask["faults"]]
