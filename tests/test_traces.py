"""`pkasim profile`, `pkasim diff` and the trace files: each in a format its viewer opens,
and the same bytes from two runs."""

from __future__ import annotations

import json

import pytest
from vcd.reader import TokenKind, tokenize

from pkasim.cli.main import main

RSA2048 = ("rsa_input_key=rsa2048-key.bin", "rsa_input_msg=rsa2048-msg.bin", "rsa_expected=rsa2048-sig.bin")
PROFILE_FIELDS = {"name", "calls", "instructions", "inclusive_cycles", "exclusive_cycles", "wait_cycles"}


def rsa2048_args(repo) -> list[str]:
    out = []
    for pair in RSA2048:
        sym, _, name = pair.partition("=")
        out += ["--load", f"{sym}={repo / 'traces' / 'inputs' / name}"]
    return out


@pytest.fixture(scope="module")
def rsa2048_traces(tmp_path_factory, elf, repo):
    """RSA-2048 on the PKA, profiled twice with every trace on: (first run's files, second's)."""
    runs = []
    for i in range(2):
        d = tmp_path_factory.mktemp(f"run{i}")
        code = main(["profile", str(elf("xrsa_opt")), *rsa2048_args(repo), "-q", "--json", str(d / "profile.json"),
                     "--folded", str(d / "stacks.folded"), "--trace-events", str(d / "trace.json"),
                     "--vcd", str(d / "signals.vcd"), "--tarmac", str(d / "pka_run.tarmac"),
                     "--tarmac-range", "pka_run", "--tarmac-limit", "500"])
        assert code == 0
        runs.append(d)
    return runs


def test_two_runs_give_byte_identical_profiles_and_traces(rsa2048_traces):
    first, second = rsa2048_traces
    for name in ("profile.json", "stacks.folded", "trace.json", "signals.vcd", "pka_run.tarmac"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_profile_json_has_the_documented_rows_summing_to_the_total(rsa2048_traces):
    doc = json.loads((rsa2048_traces[0] / "profile.json").read_text())
    assert doc["schema"] == "pkasim.profile/1" and doc["exit_code"] == 0
    rows = doc["functions"]
    assert all(PROFILE_FIELDS <= set(row) for row in rows)
    assert sum(row["exclusive_cycles"] for row in rows) == doc["cycles"]
    assert [row["exclusive_cycles"] for row in rows] == sorted((row["exclusive_cycles"] for row in rows), reverse=True)
    by_name = {row["name"]: row for row in rows}
    assert by_name["main"]["inclusive_cycles"] + by_name["Reset_Handler"]["exclusive_cycles"] <= doc["cycles"]
    assert by_name["Reset_Handler"]["inclusive_cycles"] == doc["cycles"]
    assert "wall" not in json.dumps(doc)


def test_folded_weights_sum_to_the_total(rsa2048_traces):
    doc = json.loads((rsa2048_traces[0] / "profile.json").read_text())
    lines = (rsa2048_traces[0] / "stacks.folded").read_text().splitlines()
    weights = [int(line.rsplit(" ", 1)[1]) for line in lines]
    assert sum(weights) == doc["cycles"]
    assert all(line.startswith("Reset_Handler") for line in lines)
    assert any(line.endswith("pka_run;[waiting] " + line.rsplit(" ", 1)[1]) for line in lines)


def test_trace_events_follow_the_trace_event_format(rsa2048_traces):
    doc = json.loads((rsa2048_traces[0] / "trace.json").read_text())
    profile = json.loads((rsa2048_traces[0] / "profile.json").read_text())
    hz = profile["clock_hz"]
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] in ("ms", "ns")
    assert {e["ph"] for e in events} == {"M", "B", "E", "X", "i"}
    names = {(e["tid"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {(1, "CPU (call stack)"), (2, "exceptions"), (3, "PKA"), (4, "SysTick and NVIC")}
    assert any(e["name"] == "process_name" and e["ph"] == "M" for e in events)

    def cycles(us: float) -> int:
        """ts and dur are microseconds of modeled time: a whole number of cycles."""
        c = round(us * hz / 1e6)
        assert c * 1e6 / hz == pytest.approx(us, abs=1e-9)
        return c

    stacks: dict[int, list[tuple[str, int]]] = {}
    for e in events:
        assert isinstance(e["name"], str) and e["pid"] == 1 and isinstance(e["tid"], int)
        if e["ph"] == "M":
            continue
        assert {"name", "cat", "ph", "ts", "pid", "tid"} <= set(e)
        at = cycles(e["ts"])
        if e["ph"] == "B":
            stacks.setdefault(e["tid"], []).append((e["name"], at))
        elif e["ph"] == "E":  # ends match the innermost open span, in time order
            name, began = stacks[e["tid"]].pop()
            assert name == e["name"] and began <= at
        elif e["ph"] == "X":
            assert cycles(e["dur"]) >= 0
        elif e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
    assert not any(stacks.values())
    pka_spans = [e for e in events if e["ph"] == "X" and e["tid"] == 3]
    assert len(pka_spans) == sum(profile["pka_operations"].values())
    assert sum(cycles(e["dur"]) for e in pka_spans) == profile["pka_busy_cycles"]
    assert {e["name"].split()[0] for e in pka_spans} == set(profile["pka_operations"])
    cpu = [e for e in events if e["ph"] == "B" and e["tid"] == 1 and e["cat"] == "function"]
    calls = sum(r["calls"] for r in profile["functions"])
    assert len(cpu) == calls


def test_vcd_reads_back_with_a_vcd_reader(rsa2048_traces):
    profile = json.loads((rsa2048_traces[0] / "profile.json").read_text())
    ids, times, busy = {}, [], []
    with (rsa2048_traces[0] / "signals.vcd").open("rb") as fh:
        for token in tokenize(fh):
            if token.kind is TokenKind.VAR:
                ids[token.var.id_code] = token.var.reference
            elif token.kind is TokenKind.TIMESCALE:
                assert (int(token.timescale.magnitude), token.timescale.unit.value) == (1, "ps")
            elif token.kind is TokenKind.CHANGE_TIME:
                times.append(token.time_change)
            elif token.kind is TokenKind.CHANGE_SCALAR and ids.get(token.scalar_change.id_code) == "busy":
                busy.append(token.scalar_change.value)
    assert {"sleeping", "exception", "busy", "opcode", "irq", "done", "wrap", "irq_pending"} <= set(ids.values())
    assert times == sorted(times)
    ops = sum(profile["pka_operations"].values())
    assert busy.count("1") == ops and busy.count("0") >= ops


def test_tarmac_traces_only_its_range_and_stops_at_the_limit(rsa2048_traces, elf):
    from pkasim.chip.config import load_config
    from pkasim.chip.loader import load_image

    sym = load_image(elf("xrsa_opt"), load_config()).symbol("pka_run")
    lines = (rsa2048_traces[0] / "pka_run.tarmac").read_text().splitlines()
    insns = [line.split() for line in lines if " IT " in line]
    assert len(insns) == 500
    for _cycle, clk, it, number, addr, opcode, t, mode, colon, *_text in insns:
        assert (clk, it, t, colon) == ("clk", "IT", "T", ":") and mode in ("thread", "handler")
        assert sym.address <= int(addr, 16) < sym.address + sym.size
        assert number.startswith("(") and len(opcode) in (4, 8)
    cycles = [int(w[0]) for w in insns]
    assert cycles == sorted(cycles)
    assert any(line.split()[2] == "R" for line in lines)


def test_diff_shows_each_function_with_delta_and_percent(tmp_path, capsys):
    def profile(rows):
        return {"schema": "pkasim.profile/1", "firmware": "fw.elf", "chip": "chip", "cycles": sum(r[1] for r in rows),
                "functions": [{"name": n, "calls": 1, "instructions": 1, "inclusive_cycles": c,
                               "exclusive_cycles": c, "wait_cycles": 0, "pka_busy_cycles": 0} for n, c in rows]}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(profile([("main", 100), ("slow_fn", 1000), ("gone", 5)])))
    b.write_text(json.dumps(profile([("main", 100), ("slow_fn", 1300), ("new_fn", 7)])))
    assert main(["diff", str(a), str(b), "--json", str(tmp_path / "d.json")]) == 0
    rows = {r["name"]: r for r in json.loads((tmp_path / "d.json").read_text())["functions"]}
    assert rows["slow_fn"]["exclusive_cycles"] == {"a": 1000, "b": 1300, "delta": 300, "percent": 30.0}
    assert rows["gone"]["only_in"] == "a" and rows["new_fn"]["only_in"] == "b"
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.index("slow_fn") < out.index("new_fn") < out.index("main")  # biggest change first
    assert "+300" in out and "+30.0%" in out


def test_diff_refuses_a_file_that_is_not_a_profile_in_one_line(tmp_path, capsys):
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps({"schema": "pkasim.run/1"}))
    assert main(["diff", str(bad), str(bad)]) == 65
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a pkasim profile" in err


def test_a_trace_path_that_cannot_be_written_fails_before_the_run(tmp_path, elf, capsys):
    code = main(["run", str(elf("hello")), "--vcd", str(tmp_path / "no" / "such" / "dir.vcd")])
    assert code == 74  # output that cannot be written (README: exit codes)
    captured = capsys.readouterr()
    assert "cannot write --vcd output" in captured.err and "Hello" not in captured.out


def test_run_writes_folded_stacks_summing_to_its_total(tmp_path, elf):
    folded, summary = tmp_path / "s.folded", tmp_path / "run.json"
    assert main(["run", str(elf("systick")), "-q", "--folded", str(folded), "--json", str(summary)]) == 0
    total = json.loads(summary.read_text())["cycles"]
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded.read_text().splitlines()) == total
    assert any(line.startswith("Reset_Handler;main;[exception SysTick];SysTick_Handler ")
               for line in folded.read_text().splitlines())


def test_tarmac_lists_every_iteration_of_an_idle_loop_it_covers(make_machine, elf, tmp_path):
    """spin.elf's `while (1);` between SysTick ticks is fast-forwarded (idle.c) unless
    a trace covers it: the trace is the same with the native fast paths on and off,
    one line per iteration."""
    from pkasim.analysis.trace.tarmac import TarmacWriter

    traces = []
    for fast in (True, False):
        m = make_machine()
        m.load(elf("spin"))
        m.fast_paths = fast
        fn = m.image.symbol("main")
        trace = TarmacWriter(m, tmp_path / f"main{fast}.tarmac", fn.address & ~1, (fn.address & ~1) + fn.size,
                             limit=10**6)
        assert m.run(max_cycles=60_000).reason.value == "budget"  # past the first tick
        trace.close()
        traces.append(trace.lines)
    assert traces[0] == traces[1]
    assert sum(" IT " in line for line in traces[0]) > 19_000  # 60,000 cycles of a 3-cycle `b .`
