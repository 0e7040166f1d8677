"""`pkasim regress`: the project's suite holds on the committed baselines, a slowed
function fails it by name, and every way a suite can be wrong exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from pkasim.cli.main import main
from pkasim.cli.regress import Case, Tolerance, compare

SLOW = "-DSLOW_PKA_LOAD_BE=400"  # firmware/src/pka.c: an extra loop in pka_load_be


def zig_build(build_dir: Path) -> None:
    if "ziglang" not in (build_dir / "toolchain.sig").read_text():
        pytest.skip("the baselines are for the pinned zig clang build; this build used another compiler")


def test_project_suite_holds_on_the_committed_baselines(repo, build_dir, capsys):
    """The whole of traces/suite.yaml, as `make test` runs it; the reports land in the build directory."""
    zig_build(build_dir)
    junit, md = build_dir / "regress-junit.xml", build_dir / "regress.md"
    code = main(["regress", str(repo / "traces" / "suite.yaml"), "--build-dir", str(build_dir),
                 "--junit", str(junit), "--markdown", str(md)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert ET.parse(junit).getroot().get("failures") == "0"
    assert "| xrsa | holds |" in md.read_text()


@pytest.fixture(scope="module")
def slowed_build(tmp_path_factory, repo, build_dir):
    """xrsa.elf built like firmware/build's, with pka_load_be slowed by an extra loop."""
    zig_build(build_dir)
    out = tmp_path_factory.mktemp("slow") / "build"
    subprocess.run(["make", "-s", "-C", str(repo / "firmware"), f"PYTHON={sys.executable}", f"BUILD={out}",
                    f"DEFINES={SLOW}", f"{out}/xrsa.elf"], check=True, stdout=subprocess.DEVNULL)
    return out


def test_a_slowed_function_fails_the_suite_and_is_named(repo, slowed_build, tmp_path, capsys):
    junit, md = tmp_path / "junit.xml", tmp_path / "summary.md"
    code = main(["regress", str(repo / "traces" / "suite.yaml"), "--case", "xrsa", "--build-dir", str(slowed_build),
                 "--junit", str(junit), "--markdown", str(md)])
    out = capsys.readouterr().out
    assert code == 1
    assert "function.pka_load_be.cycles" in out and "regression" in out
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert "function.pka_load_be.cycles" in failure.get("message") + failure.text
    assert "pka_load_be" in md.read_text()
    baseline = json.loads((repo / "traces" / "baselines" / "xrsa.json").read_text())["metrics"]
    assert baseline["function.pka_load_be.cycles"] > 0
    # it is the function whose own cycles grew the most (others move a little: one more
    # SysTick interrupt in a longer run, a slightly different wait for the PKA)
    rows = ([cell.strip() for cell in line.split("\u2502")] for line in out.splitlines())
    deltas = {r[0]: int(r[3].replace(",", "")) for r in rows
              if len(r) > 3 and r[0].startswith("function.") and r[0].endswith(".cycles")}
    assert max(deltas, key=deltas.get) == "function.pka_load_be.cycles"


def test_the_same_case_passes_on_the_unmodified_firmware(repo, build_dir):
    zig_build(build_dir)
    assert main(["regress", str(repo / "traces" / "suite.yaml"), "--case", "xrsa", "--build-dir", str(build_dir)]) == 0


def write_suite(tmp_path: Path, build_dir: Path, text: str | None = None) -> Path:
    suite = tmp_path / "suite.yaml"
    suite.write_text(text if text is not None else
                     f"build: {build_dir}\nbaselines: base\ncases:\n  - {{name: hello, image: hello.elf}}\n")
    return suite


def test_a_case_without_a_baseline_is_an_unreviewed_change(tmp_path, build_dir, capsys):
    assert main(["regress", str(write_suite(tmp_path, build_dir))]) == 1
    assert "no baseline yet" in capsys.readouterr().out


def test_update_writes_baselines_that_the_next_run_holds(tmp_path, build_dir):
    suite = write_suite(tmp_path, build_dir)
    assert main(["regress", str(suite), "--update"]) == 0
    doc = json.loads((tmp_path / "base" / "hello.json").read_text())
    assert doc["schema"] == "pkasim.baseline/1" and doc["metrics"]["exit_code"] == 0
    assert main(["regress", str(suite)]) == 0


def test_a_changed_value_fails_even_when_it_improved(tmp_path, build_dir, capsys):
    suite = write_suite(tmp_path, build_dir)
    main(["regress", str(suite), "--update"])
    path = tmp_path / "base" / "hello.json"
    doc = json.loads(path.read_text())
    doc["metrics"]["cycles"] += 10  # the run is now 10 cycles faster than the baseline
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["regress", str(suite)]) == 1
    assert "changed (unreviewed)" in capsys.readouterr().out


def test_a_tolerance_lets_a_small_change_pass():
    case = Case("c", Path("x.elf"), Path("c.yaml"), tolerances=[Tolerance("function.*", relative=1.0),
                                                                Tolerance("cycles", absolute=5)])
    rows = {r.metric: r.status for r in compare(case, {"cycles": 100, "function.f.cycles": 1000, "size.text": 10},
                                                {"cycles": 104, "function.f.cycles": 1011, "size.text": 11})}
    assert rows == {"cycles": "tolerated", "function.f.cycles": "regression", "size.text": "regression"}


@pytest.mark.parametrize("text, message", [
    ("cases: [", "not valid YAML"),
    ("cases: []\n", "cases: expected a non-empty list"),
    ("colour: red\ncases: [{name: a, image: a.elf}]\n", "colour: unknown key"),
    ("cases: [{name: a}]\n", "cases[0].image"),
    ("cases: [{name: a, image: a.elf, tolerance: {cycles: lots}}]\n", "tolerance for 'cycles'"),
    ("cases: [{name: a, image: nothing.elf}]\n", "nothing.elf: not built"),
])
def test_a_bad_suite_exits_2_with_one_line(tmp_path, build_dir, capsys, text, message):
    suite = write_suite(tmp_path, build_dir, f"build: {build_dir}\n{text}")
    assert main(["regress", str(suite)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err + captured.out


def test_a_missing_suite_file_exits_2(tmp_path, capsys):
    assert main(["regress", str(tmp_path / "none.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


# --------------------------------------------------------------------------- hostile baselines and loads

@pytest.mark.parametrize(("doc", "message"), [
    ("[1, 2]", "top level: expected a JSON object"),
    ("null", "top level: expected a JSON object"),
    ('{"schema": "pkasim.baseline/1", "metrics": [1]}', "metrics: expected an object"),
    ('{"schema": "pkasim.baseline/1", "metrics": {"cycles": "many"}}', 'metrics.cycles: expected a whole number'),
    ('{"schema": "pkasim.baseline/1", "metrics": {"cycles": 1' + "0" * 5000 + "}}", "unreadable baseline"),
    ("[" * 100_000 + "]" * 100_000, "unreadable baseline: JSON nested too deep"),
    ('{"schema": "other"}', "schema: not a pkasim baseline"),
])
def test_a_baseline_of_the_wrong_shape_exits_2_with_one_line_naming_file_and_key(tmp_path, build_dir, capsys,
                                                                                 doc, message):
    suite = write_suite(tmp_path, build_dir)
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "hello.json").write_text(doc)
    assert main(["regress", str(suite)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'base' / 'hello.json'}: {message}" in err
    assert err.count("pkasim: error:") == 1 and "internal error" not in err and "Traceback" not in err


def test_a_baseline_that_is_a_fifo_is_refused_without_blocking(tmp_path, build_dir, capsys):
    import os

    suite = write_suite(tmp_path, build_dir)
    (tmp_path / "base").mkdir()
    os.mkfifo(tmp_path / "base" / "hello.json")
    assert main(["regress", str(suite)]) == 2
    assert "not a regular file but a FIFO" in capsys.readouterr().err


def test_a_load_of_dev_zero_is_bounded_like_runs(tmp_path, build_dir, capsys):
    """Read until the kernel killed the process; now the symbol's size + 1, as run --load."""
    suite = write_suite(tmp_path, build_dir, f"build: {build_dir}\nbaselines: base\ncases:\n"
                                             "  - {name: hello, image: hello.elf, load: {main: /dev/zero}}\n")
    assert main(["regress", str(suite)]) == 2
    out = capsys.readouterr()
    assert "/dev/zero: more than" in out.out + out.err and "the size of 'main'" in out.out + out.err
