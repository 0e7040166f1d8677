"""Hosted C programs on pkasim: firmware/runtimes/rt.c built with newlib + rdimon,
newlib-nano + rdimon and picolibc (Debian's arm-none-eabi-gcc, -mcpu=cortex-m0) prints,
allocates, uses files, reads argv and stdin, and exits with its own code or aborts,
the same on pkasim as on QEMU's Cortex-M0 board (docs/semihosting.md)."""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pkasim.cli.report import exit_code_for
from pkasim.core.machine import Machine, StopReason
from pkasim.host.hostfiles import HostDir

RUNTIMES = ("newlib", "nano", "picolibc")
ARCH = ["-mcpu=cortex-m0", "-mthumb"]
# What each runtime needs, as gcc finds it, and the Debian package that has it.
NEEDS = {
    "newlib": ("librdimon.a", "libnewlib-arm-none-eabi"),
    "nano": ("librdimon_nano.a", "libnewlib-arm-none-eabi"),
    "picolibc": ("picolibc.specs", "picolibc-arm-none-eabi"),
}
QEMU_MACHINE = "microbit"  # QEMU's Cortex-M0 board: flash at 0, 16 KiB SRAM at 0x20000000, like the default chip
QEMU_TIMEOUT = 120  # seconds; only a guard against a hung QEMU, never a speed check
HELLO_OUT = b"hello from rt, 40 + 2 = 42\nputs line\n"


def _missing(runtime: str) -> str | None:
    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        return "arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi; .ci/run does)"
    name, package = NEEDS[runtime]
    found = subprocess.run([gcc, *ARCH, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(found):
        return f"{name} not found for {runtime} (apt-get install {package}; .ci/run does)"
    return None


@pytest.fixture(scope="session")
def rt_build(repo: Path, tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runtimes")


@pytest.fixture(params=RUNTIMES)
def runtime(request) -> str:
    return request.param


def _build(runtime: str, build: Path, repo: Path) -> Path:
    """rt.c built for ``runtime`` (once per session), or a skip that says what is missing."""
    why = _missing(runtime)
    if why:
        pytest.skip(why)
    target = build / f"rt-{runtime}.elf"
    if not target.exists():
        subprocess.run(["make", "-s", "-C", str(repo / "firmware" / "runtimes"), f"BUILD={build}",
                        f"PYTHON={sys.executable}", str(target)], check=True, stdout=subprocess.DEVNULL)
    return target


@pytest.fixture
def rt(runtime: str, rt_build: Path, repo: Path) -> Path:
    return _build(runtime, rt_build, repo)


@pytest.fixture
def rt_newlib(rt_build: Path, repo: Path) -> Path:
    """The newlib build, for the command-line checks that need one runtime only."""
    return _build("newlib", rt_build, repo)


@pytest.fixture(scope="module")
def boards(config):
    """One chip per runtime, flashed once: loading an image builds its cycle tables,
    which takes seconds for a C library's worth of code; a run takes milliseconds."""
    flashed: dict[Path, Machine] = {}
    yield flashed
    for m in flashed.values():
        m.semihosting.close_files()


@pytest.fixture
def board(boards, rt, config):
    if rt not in boards:
        boards[rt] = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        boards[rt].load(rt)
    return boards[rt]


def run_rt(m: Machine, *args: str, host_dir: Path | None = None, stdin: bytes = b""):
    """Power-cycle the board (SRAM cleared, core reset, flash kept), run rt with
    argv = [image, *args]; (process exit code, stdout, stderr, result)."""
    sram = m.config.memory["sram"]
    m.write_memory(sram.base, bytes(sram.size))
    m.reset()
    sh = m.semihosting
    sh.close_files()
    sh.streams[1], sh.streams[2] = io.BytesIO(), io.BytesIO()
    sh.argv = [str(m.image.path), *args]
    sh.stdin = io.BytesIO(stdin)
    sh.host_dir = HostDir(host_dir) if host_dir is not None else None
    r = m.run(max_cycles=10**9)
    sh.close_files()
    assert r.reason == StopReason.EXIT, r.message
    return exit_code_for(r), sh.streams[1].getvalue(), sh.streams[2].getvalue(), r


# --------------------------------------------------------------------------- on pkasim

def test_printf_puts_and_stderr(board, runtime):
    code, out, err, _ = run_rt(board, "hello")
    if runtime == "picolibc":  # its stdout and stderr both print through SYS_WRITEC, the debug console
        assert (code, out, err) == (0, HELLO_OUT + b"to stderr\n", b"")
    else:  # rdimon opens ":tt" for writing (stdout) and appending (stderr)
        assert (code, out, err) == (0, HELLO_OUT, b"to stderr\n")


def test_main_returning_3_exits_3(board):
    code, _, _, r = run_rt(board, "exit", "3")
    assert code == 3 and r.message == "firmware exited with code 3"


def test_exit_from_a_nested_call_keeps_its_code(board):
    assert run_rt(board, "_exit", "7")[0] == 7


def test_argv_reaches_main(board):
    code, out, _, _ = run_rt(board, "args", "one", "two", "3")
    assert code == 4
    assert out == b"argc=4\nargv[1]=<one>\nargv[2]=<two>\nargv[3]=<3>\n"


def test_malloc_and_free(board):
    code, out, _, _ = run_rt(board, "malloc")
    assert (code, out) == (0, b"malloc ok, sum 38016\n")


def test_file_io_inside_the_host_dir(board, tmp_path):
    code, out, _, _ = run_rt(board, "files", host_dir=tmp_path)
    assert code == 0, out
    assert out == b"read 100 lines, 900 bytes, at 50: 005\nafter append: 909 bytes\nfiles ok\n"
    assert list(tmp_path.iterdir()) == []  # renamed, then removed


def test_missing_file_sets_enoent(board, tmp_path):
    assert run_rt(board, "nofile", "absent.txt", host_dir=tmp_path)[1] == b"fopen(absent.txt): errno ENOENT\n"


def test_file_outside_the_host_dir_sets_eacces(board, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "granted").mkdir()
    out = run_rt(board, "nofile", "../secret.txt", host_dir=tmp_path / "granted")[1]
    assert out == b"fopen(../secret.txt): errno EACCES\n"


def test_abort_is_reported_as_an_abort(board, runtime):
    code, _, _, r = run_rt(board, "abort")
    if runtime == "picolibc":  # picolibc's abort() is _exit(128 + SIGABRT), an application exit
        assert code == 134 and r.message == "firmware exited with code 134"
    else:  # rdimon's abort() stops with ADP_Stopped_RunTimeErrorUnknown and SIGABRT
        assert code == 1
        assert r.message == "firmware aborted: ADP_Stopped_RunTimeErrorUnknown, SIGABRT (exit code 1)"


def test_stdin_reaches_the_program(board):
    code, out, _, _ = run_rt(board, "stdin", stdin=b"hello world\nnot read\n")
    assert (code, out) == (12, b"HELLO WORLD\n\n12 bytes\n")


def test_clock_and_time(board):
    assert run_rt(board, "clock")[:2] == (0, b"clock ok\n")


def test_no_call_is_unimplemented(board, tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="pkasim"):
        run_rt(board, "files", host_dir=tmp_path)
    assert not [rec for rec in caplog.records if rec.name in ("pkasim.unimp", "pkasim.guest")]


# --------------------------------------------------------------------------- the pkasim command

def pkasim(*argv: str | bytes, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "pkasim.cli.main", *argv], input=stdin, capture_output=True,
                          cwd=cwd, env=env, timeout=600)


def test_command_exits_with_mains_return_value(rt):
    done = pkasim("run", "-q", str(rt), "--", "exit", "3")
    assert done.returncode == 3, done.stderr
    assert done.stderr == b""  # nothing unimplemented, nothing to warn about


def test_command_passes_arguments_after_the_double_dash(rt_newlib):
    done = pkasim("run", "-q", str(rt_newlib), "--", "args", "--json", "-q")
    assert done.returncode == 3
    assert done.stdout == b"argc=3\nargv[1]=<--json>\nargv[2]=<-q>\n"


def test_command_passes_an_argument_that_is_not_utf8_as_its_bytes(rt_newlib):
    done = pkasim("run", "-q", str(rt_newlib), "--", "args", b"a\xffb")
    assert done.returncode == 2, done.stderr
    assert done.stdout == b"argc=2\nargv[1]=<a\xffb>\n"


def test_command_runs_a_firmware_whose_path_is_not_utf8(rt_newlib, tmp_path):
    path = os.path.join(os.fsencode(tmp_path), b"rt\xff.elf")
    with open(path, "wb") as fh:
        fh.write(rt_newlib.read_bytes())
    done = pkasim("run", "-q", path, "--", "exit", "0")
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""


def test_command_passes_its_stdin_through(rt_newlib):
    done = pkasim("run", "-q", str(rt_newlib), "--", "stdin", stdin=b"abc\n")
    assert (done.returncode, done.stdout) == (4, b"ABC\n\n4 bytes\n")


def test_command_grants_the_host_dir(rt_newlib, tmp_path):
    done = pkasim("run", "-q", "--host-dir", str(tmp_path), str(rt_newlib), "--", "files")
    assert done.returncode == 0, done.stdout


def test_command_summary_says_the_firmware_aborted(rt_newlib):
    done = pkasim("run", str(rt_newlib), "--", "abort")
    assert done.returncode == 1
    assert b"firmware aborted: ADP_Stopped_RunTimeErrorUnknown, SIGABRT" in done.stderr


def test_quiet_command_still_says_the_firmware_aborted(rt_newlib):
    done = pkasim("run", "-q", str(rt_newlib), "--", "abort")
    assert done.stderr == b"pkasim: firmware aborted: ADP_Stopped_RunTimeErrorUnknown, SIGABRT (exit code 1)\n"


# --------------------------------------------------------------------------- against QEMU

def _qemu_missing() -> str | None:
    qemu = shutil.which("qemu-system-arm")
    if qemu is None:
        return "qemu-system-arm is not installed (apt-get install qemu-system-arm; .ci/run does)"
    boards = subprocess.run([qemu, "-M", "help"], capture_output=True, text=True).stdout
    if QEMU_MACHINE not in boards.split():
        return f"this qemu-system-arm has no '{QEMU_MACHINE}' (Cortex-M0) board"
    return None


def qemu(elf: Path, *args: str, cwd: Path, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """Run on QEMU's Cortex-M0 board with semihosting; QEMU's command line is arg=...,
    argv[0] first, as pkasim builds it (files resolve in ``cwd``)."""
    config = ",".join(["enable=on", "target=native", *(f"arg={a}" for a in (str(elf), *args))])
    done = subprocess.run(["qemu-system-arm", "-M", QEMU_MACHINE, "-nographic", "-monitor", "none", "-serial", "none",
                           "-semihosting-config", config, "-kernel", str(elf)],
                          input=stdin, capture_output=True, cwd=cwd, timeout=QEMU_TIMEOUT)
    return done.returncode, done.stdout, done.stderr


CHECKS = [
    ("hello",),
    ("exit", "3"),
    ("exit", "300"),
    ("exit", "-1"),
    ("_exit", "7"),
    ("args", "a", "bb", "ccc"),
    ("malloc",),
    ("files",),
    ("nofile", "absent.txt"),
    ("abort",),
    ("stdin",),
    ("clock",),
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: "-".join(c))
def test_same_output_and_exit_code_as_qemu(board, rt, runtime, check, tmp_path):
    why = _qemu_missing()
    if why:
        pytest.skip(why)
    if runtime == "picolibc" and check[0] == "stdin":
        pytest.skip("QEMU 7.2 does not feed SYS_READC (picolibc's console input) from a pipe")
    stdin = b"some input\nmore\n"
    (tmp_path / "qemu").mkdir()
    (tmp_path / "pkasim").mkdir()
    want = qemu(rt, *check, cwd=tmp_path / "qemu", stdin=stdin)
    got = run_rt(board, *check, host_dir=tmp_path / "pkasim", stdin=stdin)[:3]
    if runtime == "picolibc":  # one console (SYS_WRITEC): QEMU shows it on stderr, pkasim on stdout
        got, want = (got[0], got[1] + got[2]), (want[0], want[1] + want[2])
    assert got == want


# --------------------------------------------------------------------------- a stock rdimon build

def _doc_recipe(repo: Path) -> tuple[str, str]:
    """hello.c and the shell recipe of docs/semihosting.md, "A stock --specs=rdimon.specs build"."""
    text = (repo / "docs" / "semihosting.md").read_text()
    after = text.split("<!-- tests/test_runtimes.py runs the next two blocks -->", 1)[1]
    c, sh = re.findall(r"^```(?:c|sh)\n(.*?)^```", after, re.M | re.S)[:2]
    return c, sh


@pytest.fixture(scope="module")
def stock(repo: Path, tmp_path_factory) -> Path:
    """A directory with the page's hello.c, and PKASIM: a checkout whose .venv runs this
    interpreter (the recipe calls $PKASIM/.venv/bin/python and .../pkasim)."""
    why = _missing("newlib")
    if why:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("rdimon")
    checkout = work / "pkasim"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    for name in ("configs", "firmware"):
        (checkout / name).symlink_to(repo / name)
    for name, command in (("python", sys.executable), ("pkasim", f"{sys.executable} -m pkasim.cli.main")):
        wrapper = checkout / ".venv" / "bin" / name  # a script, not a symlink: a venv's python finds its
        wrapper.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")  # packages from its own path
        wrapper.chmod(0o755)
    (work / "hello.c").write_text(_doc_recipe(repo)[0])
    return work


def test_a_plain_rdimon_build_is_refused_for_its_missing_vector_table(stock):
    subprocess.run(["arm-none-eabi-gcc", *ARCH, "--specs=rdimon.specs", "hello.c", "-o", "plain.elf"], cwd=stock,
                   check=True)
    done = pkasim("run", "plain.elf", cwd=stock)
    assert done.returncode == 65
    assert done.stderr == (b"pkasim: error: plain.elf: no vector table at 0x00000000 "
                           b"(the core reads SP and PC from there at reset)\n")


def test_the_documented_rdimon_recipe_runs_on_pkasim(stock, repo):
    env = dict(os.environ, PKASIM=str(stock / "pkasim"), PYTHONPATH=str(repo))
    done = subprocess.run(["bash", "-c", _doc_recipe(repo)[1]], cwd=stock, env=env, capture_output=True,
                          timeout=600)
    assert done.returncode == 3, done.stderr  # main's return value, through pkasim run
    assert done.stdout == b"hello from newlib on pkasim\n"


def test_the_documented_rdimon_recipe_gives_the_same_on_qemu(stock, repo):
    why = _qemu_missing()
    if why:
        pytest.skip(why)
    elf = stock / "hello.elf"
    if not elf.exists():
        test_the_documented_rdimon_recipe_runs_on_pkasim(stock, repo)
    assert qemu(elf, cwd=stock) == (3, b"hello from newlib on pkasim\n", b"")
