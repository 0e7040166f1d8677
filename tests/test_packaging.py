"""What pkasim carries and how it starts (docs/packaging.md): bundled chips by name, the
firmware manifest, `pkasim configs`, `init` and `--version`, the lazy subcommands, and
one clear line when a bundled file, the native library or an optional package is
missing. The wheel itself is built and installed by tests/test_wheel.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pkasim import native
from pkasim.base import resources
from pkasim.base.errors import EXIT_CONFIG, EXIT_NO_INPUT, EXIT_UNAVAILABLE, EXIT_USAGE, UnavailableError
from pkasim.base.extras import need
from pkasim.chip.config import load_config
from pkasim.cli.main import COMMANDS, build_parser, main

HEAVY = ("matplotlib", "dask", "distributed", "pandas", "pyarrow", "cryptography")


def run(argv: list) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def one_error_line(err: str, code: int, expected: int, *phrases: str) -> None:
    assert code == expected, err
    assert "Traceback" not in err and "internal error" not in err
    lines = [line for line in err.splitlines() if line.startswith("pkasim: error:")]
    assert len(lines) == 1, err
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


# --------------------------------------------------------------------------- bundled chips

def test_a_bundled_chip_loads_by_its_name() -> None:
    assert "Victor" in load_config("presets/victor-radix16").chip


def test_a_bundled_chip_name_may_end_in_yaml() -> None:
    assert load_config("ciu98320b-24mhz.yaml").core.clock_hz == 24_000_000


def test_an_existing_file_wins_over_a_bundled_name(tmp_path, monkeypatch) -> None:
    text = resources.default_chip().read_text().replace("chip: CIU98320B", "chip: MY CHIP", 1)
    (tmp_path / "ciu98320b").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert load_config("ciu98320b").chip == "MY CHIP"


def test_an_unknown_chip_name_is_one_line_that_lists_the_bundled_chips(elf, capsys) -> None:
    code = run(["run", elf("hello"), "--config", "ciu9999"])
    one_error_line(capsys.readouterr().err, code, EXIT_NO_INPUT, "ciu9999: no such config file",
                   "ciu98320b", "presets/victor-radix16")


def test_a_chip_file_anywhere_extends_a_bundled_chip_by_name(tmp_path) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text("extends: ciu98320b\ncore:\n  muls_cycles: 32\n")
    config = load_config(path)
    assert config.core.muls_cycles == 32
    assert config.chip == "CIU98320B"


def test_configs_lists_every_bundled_chip_and_sweep_by_name(capsys) -> None:
    assert run(["configs"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()]
    bundled = sorted(p.relative_to(resources.chips_dir()).with_suffix("").as_posix()
                     for p in resources.chips_dir().rglob("*.yaml"))
    assert sorted(names) == bundled
    assert names[0] == "ciu98320b" and "(default)" in out.splitlines()[0]


def test_configs_paths_are_the_files_the_names_load(capsys) -> None:
    assert run(["configs", "--paths"]) == 0
    for line in capsys.readouterr().out.splitlines():
        name, path = line.split()
        assert resources.bundled(name) == Path(path) and Path(path).is_file()


@pytest.mark.parametrize("command", ["run", "debug", "gdbserver", "profile", "sign", "bench", "ct-check", "init"])
def test_help_names_the_bundled_default_chip_not_a_path(command, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert run([command, "--help"]) == 0
    out = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "ciu98320b" in out
    assert "configs/ciu98320b.yaml" not in out and str(resources.chips_dir()) not in out


# --------------------------------------------------------------------------- --version and start-up

def test_version_names_pkasim_unicorn_and_the_default_chip(capsys) -> None:
    import unicorn

    import pkasim

    assert run(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"pkasim {pkasim.__version__}"
    assert lines[1].startswith(f"unicorn {unicorn.__version__}")
    digest = resources.file_digest(resources.default_chip())[:16]
    assert lines[2].startswith(f"chip ciu98320b: CIU98320B, sha256 {digest}")


def test_the_command_table_gives_each_command_its_own_help() -> None:
    full = build_parser(None)
    actions = next(a for a in full._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {choice.dest: choice.help for choice in actions._choices_actions}
    assert helps == {name: help_text for name, (_, help_text) in COMMANDS.items()}


def _modules_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after running ``code``."""
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split("\n")[-2].split())


def test_version_loads_no_model_code_and_none_of_the_heavy_packages() -> None:
    loaded = _modules_after("from pkasim.cli.main import main\nimport io, contextlib\n"
                            "with contextlib.redirect_stdout(io.StringIO()): main(['--version'])")
    assert not loaded & set(HEAVY)
    probe = ("from pkasim.cli.main import main\nimport io, contextlib, sys\n"
             "with contextlib.redirect_stdout(io.StringIO()): main(['--version'])\n"
             "print(sorted(m for m in sys.modules if m.startswith(('pkasim.core', 'pkasim.chip.loader'))))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"


def test_run_loads_none_of_the_heavy_packages(elf) -> None:
    loaded = _modules_after(f"from pkasim.cli.main import main\nmain(['run', '-q', {str(elf('hello'))!r}])")
    assert "unicorn" in loaded
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


# --------------------------------------------------------------------------- missing pieces

def test_a_missing_bundled_image_is_one_line_exit_66(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(resources, "firmware_dir", lambda: tmp_path)
    code = run(["bench", "--only", "rsa2048-win"])
    one_error_line(capsys.readouterr().err, code, EXIT_NO_INPUT, "bundled firmware image xrsa_win.elf is missing")


def test_a_missing_bundled_card_image_is_one_line_exit_66(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(resources, "firmware_dir", lambda: tmp_path)
    code = run(["usb", "descriptors"])
    one_error_line(capsys.readouterr().err, code, EXIT_NO_INPUT, "bundled firmware image card.elf is missing")


def test_missing_bundled_chip_files_are_one_line_exit_66(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(resources, "chips_dir", lambda: tmp_path / "configs")
    code = run(["configs"])
    one_error_line(capsys.readouterr().err, code, EXIT_NO_INPUT, "bundled chip files are missing")


def test_an_unreadable_default_chip_is_one_line_exit_66(monkeypatch, tmp_path, elf, capsys) -> None:
    import pkasim.chip.config as config_module

    monkeypatch.setattr(config_module, "DEFAULT_CONFIG", tmp_path / "ciu98320b.yaml")
    monkeypatch.setattr(resources, "chips_dir", lambda: tmp_path)
    code = run(["run", elf("hello")])
    one_error_line(capsys.readouterr().err, code, EXIT_NO_INPUT, "ciu98320b")


def test_a_missing_native_library_is_one_line_exit_69(monkeypatch, elf, capsys) -> None:
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_find", lambda: None)
    code = run(["run", elf("hello")])
    one_error_line(capsys.readouterr().err, code, EXIT_UNAVAILABLE, "native cycle hook", "reinstall pkasim")


def test_an_unloadable_native_library_is_one_line_exit_69(monkeypatch, tmp_path, elf, capsys) -> None:
    broken = tmp_path / "_cyclehook.so"
    broken.write_bytes(b"not a shared object")
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_find", lambda: broken)
    code = run(["run", elf("hello")])
    one_error_line(capsys.readouterr().err, code, EXIT_UNAVAILABLE, "does not load")


def test_a_missing_optional_package_names_the_extra_that_brings_it(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what `import pyarrow` sees when it is not installed
    code = run(["sweep", "sweeps/rsa4096-10ops", "--out", tmp_path])
    one_error_line(capsys.readouterr().err, code, EXIT_UNAVAILABLE, "pip install 'pkasim[sweep]'")


def test_need_passes_on_an_error_inside_an_installed_package(monkeypatch) -> None:
    def broken(name: str):
        raise ModuleNotFoundError("No module named 'six'", name="six")

    monkeypatch.setattr("importlib.import_module", broken)
    with pytest.raises(ModuleNotFoundError):
        need("matplotlib", "plot", "pkasim bench --plot")


def test_need_raises_unavailable_for_a_missing_package(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UnavailableError, match=r"pip install 'pkasim\[plot\]'"):
        need("matplotlib", "plot", "pkasim bench --plot")


# --------------------------------------------------------------------------- the firmware manifest

def test_the_manifest_lists_the_bundled_images_with_their_current_sources(build_dir) -> None:
    sys.path.insert(0, str(build_dir.parent / "tools"))
    try:
        import manifest
    finally:
        sys.path.pop(0)
    assert manifest.check(build_dir) is None
    doc = json.loads((build_dir / "manifest.json").read_text())
    assert {"card.elf", "hello.elf", "xrsa.elf", "xrsa_win.elf", "rsa_soft.elf"} <= set(doc["images"])
    assert "src/rsa.c" in doc["sources"] and "build/memory.ld" in doc["sources"]


@pytest.fixture
def firmware_copy(repo, build_dir, tmp_path) -> Path:
    """A copy of firmware/ (sources, tools, built images and manifest), to change."""
    copy = tmp_path / "firmware"
    shutil.copytree(repo / "firmware", copy, ignore=shutil.ignore_patterns("obj", "__pycache__"))
    return copy


def _check(firmware: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(firmware / "tools" / "manifest.py"), "check", str(firmware / "build")],
                          capture_output=True, text=True)


def test_a_changed_source_makes_the_bundled_images_stale(firmware_copy) -> None:
    assert _check(firmware_copy).returncode == 0
    with (firmware_copy / "src" / "rsa.c").open("a") as fh:
        fh.write("/* changed */\n")
    done = _check(firmware_copy)
    assert done.returncode == 1
    assert "firmware/src/rsa.c changed since the images were built" in done.stderr


def test_a_new_source_makes_the_bundled_images_stale(firmware_copy) -> None:
    (firmware_copy / "src" / "extra.c").write_text("int extra;\n")
    assert "firmware/src/extra.c is new" in _check(firmware_copy).stderr


def test_images_of_another_compiler_are_refused_for_the_wheel(firmware_copy) -> None:
    path = firmware_copy / "build" / "manifest.json"
    doc = json.loads(path.read_text())
    doc["ziglang"], doc["compiler"] = None, "arm-none-eabi-gcc: arm-none-eabi-gcc (15:12.2) 12.2.1"
    path.write_text(json.dumps(doc))
    assert "not the pinned zig clang" in _check(firmware_copy).stderr


# --------------------------------------------------------------------------- pkasim init

def _init_and_run(tmp_path: Path, *make_args: str) -> subprocess.CompletedProcess:
    proj = tmp_path / "proj"
    assert run(["init", proj]) == 0
    subprocess.run(["make", "-s", "-C", str(proj), *make_args], check=True, capture_output=True)
    return subprocess.run([sys.executable, "-m", "pkasim", "run", "-q", str(proj / "build" / "app.elf")],
                          capture_output=True, text=True, cwd=tmp_path)


def test_init_makes_a_project_that_builds_with_the_pinned_clang_and_runs(tmp_path) -> None:
    done = _init_and_run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "sum of squares 1..100 = 338350" in done.stdout


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc (Debian gcc-arm-none-eabi)")
def test_init_makes_a_project_that_builds_with_arm_none_eabi_gcc_and_runs(tmp_path) -> None:
    done = _init_and_run(tmp_path, "CC=arm-none-eabi-gcc")
    assert done.returncode == 0, done.stderr
    assert "sum of squares 1..100 = 338350" in done.stdout


def test_init_writes_the_sources_the_linker_script_and_the_chip_it_was_given(tmp_path) -> None:
    assert run(["init", tmp_path / "p", "--config", "presets/victor-radix16"]) == 0
    proj = tmp_path / "p"
    for rel in ("Makefile", "main.c", "link.ld", "README.md", "src/startup.c", "src/semihost.h", "src/pka.c"):
        assert (proj / rel).is_file(), rel
    makefile = (proj / "Makefile").read_text()
    assert "CHIP   ?= presets/victor-radix16" in makefile
    assert f"PYTHON ?= {sys.executable}" in makefile


def test_init_refuses_a_folder_that_is_not_empty(tmp_path, capsys) -> None:
    (tmp_path / "main.c").write_text("mine\n")
    code = run(["init", tmp_path])
    one_error_line(capsys.readouterr().err, code, EXIT_USAGE, "not an empty folder")
    assert (tmp_path / "main.c").read_text() == "mine\n"


def test_init_checks_its_chip_before_writing_anything(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: ciu98320b\ncore:\n  muls_cycles: 7\n")
    code = run(["init", tmp_path / "p", "--config", bad])
    one_error_line(capsys.readouterr().err, code, EXIT_CONFIG, "muls_cycles")
    assert not (tmp_path / "p").exists()


# --------------------------------------------------------------------------- building

def test_a_build_without_a_c_compiler_stops_with_one_line_saying_what_to_install(repo, tmp_path) -> None:
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", str(tmp_path / "t"),
                           "--build-lib", str(tmp_path / "l")], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "cannot build its native cycle hook" in line]
    assert len(lines) == 1 and "install gcc or clang" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
