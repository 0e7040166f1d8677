"""The engine's profile-guided build (engine/build.py, engine/train.py; docs/engine.md):
when it is done, when it is not, and that a build without a profile is still a build."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def build(tmp_path, monkeypatch):
    """engine/build.py as a module, its checkout moved to tmp_path."""
    spec = importlib.util.spec_from_file_location("engine_build_pgo", ROOT / "engine" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "OUT", tmp_path / "_engine")
    monkeypatch.delenv("PKASIM_ENGINE_PGO", raising=False)
    return module


def _images(root: Path, build) -> None:
    (root / "firmware" / "build").mkdir(parents=True)
    for name in build.TRAINING_IMAGES:
        (root / "firmware" / "build" / name).write_bytes(b"")


def _fake_compiler(tmp_path: Path, banner: str, version: str) -> str:
    cc = tmp_path / "cc"
    cc.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{banner}'; else echo {version}; fi\n")
    cc.chmod(0o755)
    return str(cc)


def _fake_pipeline(tmp_path: Path, build, monkeypatch, training: str | None) -> list[str]:
    """build() with the sdist, the patches and the compiler replaced: the flags of each
    compile, in order; the training run answers ``training``."""
    sdist = tmp_path / "unicorn.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        info = tarfile.TarInfo(f"unicorn-{build.VERSION}/src/README")
        tar.addfile(info, io.BytesIO(b""))
    flags: list[str] = []

    def compile_unicorn(src, build_dir, f, log):
        flags.append(f)
        build_dir.mkdir(parents=True, exist_ok=True)
        (build_dir / build.LIBRARY).write_bytes(b"library")

    monkeypatch.setattr(build, "fetch_sdist", lambda work, log: sdist)
    monkeypatch.setattr(build, "apply_patches", lambda src, log: None)
    monkeypatch.setattr(build, "compile_unicorn", compile_unicorn)
    monkeypatch.setattr(build, "training_run", lambda library, log: training)
    monkeypatch.setattr(build, "pgo_possible", lambda: None)
    return flags


def test_the_profile_guided_build_needs_the_firmware_images(build, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", _fake_compiler(tmp_path, "cc (GCC) 12.2.0\nCopyright Free Software Foundation", "12.2.0"))
    why = build.pgo_possible()
    assert why is not None and "make firmware" in why


def test_the_profile_guided_build_is_taken_with_gcc_and_the_images(build, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", _fake_compiler(tmp_path, "cc (GCC) 12.2.0\nCopyright Free Software Foundation", "12.2.0"))
    _images(tmp_path, build)
    assert build.pgo_possible() is None


def test_a_python_without_pkasim_builds_without_a_profile(build, tmp_path, monkeypatch):
    """A wheel built from the sdist in an isolated environment: the training run could
    not import pkasim, so the instrumented build is not even made."""
    monkeypatch.setenv("CC", _fake_compiler(tmp_path, "cc (GCC) 12.2.0\nCopyright Free Software Foundation", "12.2.0"))
    _images(tmp_path, build)
    bare = tmp_path / "python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    monkeypatch.setattr(build.sys, "executable", str(bare))
    assert "cannot import pkasim" in build.pgo_possible()


def test_a_compiler_that_is_not_gcc_builds_without_a_profile(build, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", _fake_compiler(tmp_path, "clang version 17.0.0", "17.0.0"))
    _images(tmp_path, build)
    assert "not GCC" in build.pgo_possible()


def test_gcc_before_10_builds_without_a_profile(build, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", _fake_compiler(tmp_path, "cc (GCC) 9.4.0\nCopyright Free Software Foundation", "9.4.0"))
    _images(tmp_path, build)
    assert "10 or later" in build.pgo_possible()


def test_pkasim_engine_pgo_0_turns_the_profile_off(build, tmp_path, monkeypatch):
    _images(tmp_path, build)
    monkeypatch.setenv("PKASIM_ENGINE_PGO", "0")
    assert build.pgo_possible() == "PKASIM_ENGINE_PGO=0"


def test_a_trained_build_compiles_instrumented_then_with_the_profile(build, tmp_path, monkeypatch):
    flags = _fake_pipeline(tmp_path, build, monkeypatch, training=None)
    build.build(force=True)
    assert len(flags) == 2
    assert "-fprofile-generate=" in flags[0] and "-fprofile-use" not in flags[0]
    assert "-fprofile-use=" in flags[1] and "-fprofile-generate" not in flags[1]
    manifest = json.loads((tmp_path / "_engine" / "engine.json").read_text())
    assert manifest["pgo"] == "trained by engine/train.py"


def test_a_failed_training_run_builds_the_library_without_a_profile(build, tmp_path, monkeypatch):
    flags = _fake_pipeline(tmp_path, build, monkeypatch, training="the training run failed (exit 1: x)")
    path = build.build(force=True)
    assert path.read_bytes() == b"library"
    assert "-fprofile" not in flags[-1]
    manifest = json.loads((tmp_path / "_engine" / "engine.json").read_text())
    assert manifest["pgo"].startswith("off (the training run failed")
    assert "built without a profile" in (tmp_path / ".venv" / "pkasim-engine" / "build.log").read_text()


def test_the_training_run_refuses_a_library_pkasim_does_not_take(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PKASIM_ENGINE"}
    done = subprocess.run([sys.executable, str(ROOT / "engine" / "train.py"), str(tmp_path / "libunicorn.so.2")],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("training run: pkasim did not take")
