# pkasim: `make demo` and `make test` set everything up on a fresh machine (a venv with
# pkasim and its pinned tools, the firmware built with the pinned cross compiler),
# then run. Everything lands in .venv/ and firmware/build/.

PYTHON ?= python3
VENV   := .venv
PY     := $(abspath $(VENV))/bin/python
STAMP  := $(VENV)/.installed
NATIVE := $(VENV)/.native
ENGINE := emulator/native/_engine/engine.json
CONFIG ?= configs/ciu98320b.yaml
FW_CC  ?=

.PHONY: demo test fuzz firmware images setup lint bench dist clean engine

demo: setup firmware
	@echo "== hello: a C firmware boots on the emulated SC000 and prints through semihosting"
	$(VENV)/bin/pkasim run firmware/build/hello.elf --config $(CONFIG)
	@echo "== systick: 10 SysTick interrupts at 1 ms, the core sleeping in WFI between them"
	$(VENV)/bin/pkasim run firmware/build/systick.elf --config $(CONFIG)
	@echo "== xrsa: an RSA-4096 signature on the 2048-bit Montgomery multiplier (xRSA, paper variant)"
	$(VENV)/bin/pkasim run firmware/build/xrsa.elf --config $(CONFIG)
	@echo "== bench: RSA-2048 vs RSA-4096 (xRSA) vs software on this chip"
	$(VENV)/bin/pkasim bench --config $(CONFIG)

test: setup firmware lint
	$(VENV)/bin/python -m pytest -q

# The long fuzzing run (tests/fuzz/run.py; counts in docs/robustness.md). `make test`
# runs the same fuzzers on a few hundred fixed inputs. FUZZ_ARGS='--elf 100 --seed 7'.
fuzz: setup firmware
	$(PY) tests/fuzz/run.py $(FUZZ_ARGS)

setup: $(STAMP) $(NATIVE) $(ENGINE)

$(STAMP): setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $@ $(NATIVE)

# The native cycle hook is rebuilt when its source changes.
$(NATIVE): emulator/native/state.c emulator/native/cyclehook.c emulator/native/codecache.c emulator/native/codecache.h emulator/native/thumb.c emulator/native/thumb.h \
           emulator/native/unaligned.c emulator/native/unaligned.h \
           emulator/native/excmodel.c emulator/native/idle.c emulator/native/pkstate.h peripherals/pka_fast.c peripherals/pka_montmul.c peripherals/pka_montmul.h peripherals/systick_fast.c \
           emulator/native/observe.c emulator/native/observe.h emulator/native/cthash.c emulator/native/leakage.c emulator/native/tlb.c emulator/native/retranslate.c emulator/native/flashalias.c emulator/native/watchwindow.c | $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# pkasim's engine (docs/engine.md): Unicorn 2.1.4 from its sdist with engine/patches/,
# ARM only, profile-guided by a training run on the firmware images (built first; they
# need pkasim but not its engine). A build that cannot be done warns once and pkasim uses
# the stock wheel.
$(ENGINE): engine/build.py engine/train.py $(wildcard engine/patches/*.patch) | $(STAMP) $(NATIVE) images
	$(PY) engine/build.py

engine: | $(STAMP) $(NATIVE) images
	$(PY) engine/build.py --force

firmware: setup images

images: $(STAMP) $(NATIVE)
	$(MAKE) -s -C firmware PYTHON=$(PY) CONFIG=$(abspath $(CONFIG)) $(if $(FW_CC),CC=$(FW_CC))

# The sdist and the wheel in dist/ (docs/packaging.md): the wheel is built from the sdist
# and carries the firmware images `make firmware` built, with their manifest.
dist: setup firmware
	rm -rf dist *.egg-info
	$(PY) -m build --no-isolation --outdir dist .
	$(PY) -m twine check --strict dist/*

bench: setup firmware
	$(VENV)/bin/python benchmarks/emu_speed.py

# ruff, then the layers contract of pyproject.toml (import-linter). import-linter finds a
# package's modules by walking its folder; emulator/peripherals links to peripherals/,
# so the installed package's two folders read as one (plain `lint-imports` works too).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	$(MAKE) -s -C firmware clean
	rm -rf build dist *.egg-info emulator/native/_cyclehook*.so emulator/native/_engine .pytest_cache .ruff_cache

distclean: clean
	rm -rf $(VENV)
