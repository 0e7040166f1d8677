"""The documentation, checked by running it.

- Every ```python block of README.md and docs/*.md runs as written, against the built
  firmware, one namespace per page (a page's later blocks build on its earlier ones),
  in a scratch directory laid out like the checkout (firmware/, configs/, traces/).
  Where a block states an outcome the test checks it: the README's breakpoint is hit.
- Every `pkasim ...` command of a shell block (```sh, or a `$ pkasim` transcript)
  parses: the command exists and takes the options the page uses. A `python -m X`
  anywhere in a page names a module that exists.
- The regression suite's case count the pages state is the count in traces/suite.yaml.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pkasim.cli.main import build_parser
from pkasim.core.results import StopReason

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(page: Path, *langs: str) -> list[tuple[int, str, str]]:
    """(line, language, text) of each fenced block of ``page`` in one of ``langs``."""
    text = page.read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)
            if m.group(1) in langs]


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --------------------------------------------------------------------------- Python blocks

PYTHON_PAGES = [p for p in PAGES if blocks(p, "python")]


@pytest.fixture
def scratch(tmp_path, build_dir, monkeypatch):
    """A working directory with the checkout's firmware images, chip files and traces;
    firmware/runtimes/build is built there when a page uses it (needs the Debian
    toolchain: skipped with the reason otherwise)."""
    (tmp_path / "firmware").mkdir()
    (tmp_path / "firmware" / "build").symlink_to(build_dir)
    for name in ("configs", "traces"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def build_runtimes(scratch: Path) -> None:
    from test_runtimes import _missing

    why = _missing("newlib")
    if why:
        pytest.skip(why)
    subprocess.run(["make", "-s", "-C", str(ROOT / "firmware" / "runtimes"),
                    f"BUILD={scratch / 'firmware' / 'runtimes' / 'build'}", f"PYTHON={sys.executable}"],
                   check=True, stdout=subprocess.DEVNULL)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=rel)
def test_python_blocks_run_as_written(page, scratch, capfd):
    namespace: dict = {"__name__": "__doc__"}
    for line, _, code in blocks(page, "python"):
        if "firmware/runtimes/build/" in code:
            build_runtimes(scratch)
        exec(compile(code, f"{rel(page)}:{line}", "exec"), namespace)  # noqa: S102 - the page's own example
        if "add_breakpoint(" in code:  # the example stops at its breakpoint, not elsewhere
            assert namespace["result"].reason == StopReason.BREAKPOINT, namespace["result"]
            assert namespace["m"].pc in namespace["m"].breakpoints
    result = namespace.get("result")
    if getattr(result, "reason", None) == StopReason.EXIT:  # a RunResult (pages also name other results so)
        assert result.exit_code == expected_exit(page), result


def expected_exit(page: Path) -> int:
    """The exit code a page's comment promises (``exits N``), else 0."""
    promised = re.findall(r"exits (\d+)", "".join(code for _, _, code in blocks(page, "python")))
    return int(promised[-1]) if promised else 0


# --------------------------------------------------------------------------- shell blocks

def commands(page: Path) -> list[tuple[int, list[str]]]:
    """(line, argv after 'pkasim') of every pkasim command in the page's shell blocks."""
    out = []
    for line, lang, text in blocks(page, "sh", "console", ""):
        joined = re.sub(r"\\\n\s*", " ", text)
        for i, raw in enumerate(joined.splitlines()):
            if lang == "" and not raw.startswith("$ "):
                continue  # output in a transcript
            words = synopsis(raw.removeprefix("$ "))
            for segment in segments(words):
                if segment and Path(segment[0]).name == "pkasim":
                    out.append((line + i, segment[1:]))
    return out


def synopsis(raw: str) -> list[str]:
    """A command line as the page writes it, made parseable: comments dropped, ``[...]``
    optional parts kept, ``(A | B)`` alternatives reduced to A, ``...`` and ``[options]``
    dropped, ``SYMBOL[=KIND:N]`` read as SYMBOL."""
    raw = re.sub(r"\(([^()|]*)\|[^()]*\)", r"\1", raw)
    raw = raw.replace("[options]", "").replace("...", "")
    raw = re.sub(r"(?<=\S)\[[^\]]*\]", "", raw)  # an optional part of a word: SYMBOL[=KIND:N] is SYMBOL
    raw = raw.replace("[", "").replace("]", "")
    return [PLACEHOLDERS.get(w, w) for w in shlex.split(raw, comments=True)]


# A synopsis's metavariables that stand for numbers, given one (FILE, DIR... are any text).
PLACEHOLDERS = {"N": "2", "CYCLES": "1000", "SECONDS": "1", "PORT": "3333", "BITS": "2048"}


def segments(words: list[str]) -> list[list[str]]:
    """The simple commands of a line: split at | ; && ||, redirections dropped."""
    out, current, skip = [], [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in ("|", ";", "&&", "||", "&"):
            out.append(current)
            current = []
        elif w in ("<", ">", ">>", "2>", "2>&1"):
            skip = w != "2>&1"
        else:
            current.append(w)
    out.append(current)
    return out


SHELL = [(page, line, argv) for page in PAGES for line, argv in commands(page)]


def test_the_pages_have_pkasim_commands():
    assert len(SHELL) > 40  # the extraction finds them (README alone has 15)


@pytest.mark.parametrize(("page", "line", "argv"), SHELL, ids=[f"{rel(p)}:{n}" for p, n, _ in SHELL])
def test_pkasim_commands_in_the_pages_parse(page, line, argv):
    if "--" in argv:  # the firmware's own command line: pkasim hands it over unparsed
        argv = argv[:argv.index("--")]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{rel(page)}:{line}: pkasim {' '.join(argv)}: exit {exc.code}")


MODULES = sorted({(rel(page), m) for page in PAGES for m in re.findall(r"python3?\"? -m ([\w.]+)", page.read_text())})


@pytest.mark.parametrize(("page", "module"), MODULES)
def test_python_m_modules_in_the_pages_exist(page, module):
    assert importlib.util.find_spec(module) is not None, f"{page}: python -m {module}"


# --------------------------------------------------------------------------- stated figures

def test_the_suites_case_count_in_the_pages_is_traces_suite_yaml():
    cases = len(yaml.safe_load((ROOT / "traces" / "suite.yaml").read_text())["cases"])
    stated = [(rel(page), int(n)) for page in PAGES
              for n in re.findall(r"traces/suite\.yaml`\W*(?:has )?(\d+) cases", " ".join(page.read_text().split()))]
    assert stated, "no page states the suite's case count any more: update this test"
    assert all(n == cases for _, n in stated), f"traces/suite.yaml has {cases} cases; the pages say {stated}"
