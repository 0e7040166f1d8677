# pkasim: `make demo` and `make test` set everything up on a fresh machine (a venv with
# pkasim and its pinned tools, the firmware built with the pinned cross compiler),
# then run. Everything lands in .venv/ and firmware/build/.

PYTHON ?= python3
VENV   := .venv
PY     := $(abspath $(VENV))/bin/python
STAMP  := $(VENV)/.installed
NATIVE := $(VENV)/.native
CONFIG ?= configs/ciu98320b.yaml
FW_CC  ?=

.PHONY: demo test fuzz firmware setup lint bench clean

demo: setup firmware
	@echo "== hello: a C firmware boots on the emulated SC000 and prints through semihosting"
	$(VENV)/bin/pkasim run firmware/build/hello.elf --config $(CONFIG)
	@echo "== systick: 10 SysTick interrupts at 1 ms, the core sleeping in WFI between them"
	$(VENV)/bin/pkasim run firmware/build/systick.elf --config $(CONFIG)
	@echo "== xrsa: an RSA-4096 signature on the 2048-bit Montgomery multiplier (xRSA, paper variant)"
	$(VENV)/bin/pkasim run firmware/build/xrsa.elf --config $(CONFIG)
	@echo "== bench: RSA-2048 vs RSA-4096 (xRSA) vs software on this chip"
	$(VENV)/bin/pkasim bench --config $(CONFIG)

test: setup firmware
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest -q

# The long fuzzing run (tests/fuzz/run.py; counts in docs/robustness.md). `make test`
# runs the same fuzzers on a few hundred fixed inputs. FUZZ_ARGS='--elf 100 --seed 7'.
fuzz: setup firmware
	$(PY) tests/fuzz/run.py $(FUZZ_ARGS)

setup: $(STAMP) $(NATIVE)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $@ $(NATIVE)

# The native cycle hook is rebuilt when its source changes.
$(NATIVE): emulator/cyclehook.c emulator/codecache.c emulator/codecache.h emulator/thumb.c emulator/thumb.h \
           emulator/align.c emulator/align.h \
           emulator/excmodel.c emulator/idle.c emulator/pkstate.h peripherals/pka_fast.c peripherals/systick_fast.c \
           emulator/observe.c emulator/observe.h emulator/cthash.c | $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

firmware: setup
	$(MAKE) -s -C firmware PYTHON=$(PY) CONFIG=$(abspath $(CONFIG)) $(if $(FW_CC),CC=$(FW_CC))

bench: setup firmware
	$(VENV)/bin/python benchmarks/emu_speed.py

lint: setup
	$(VENV)/bin/ruff check .

clean:
	$(MAKE) -s -C firmware clean
	rm -rf build *.egg-info emulator/_cyclehook*.so .pytest_cache .ruff_cache

distclean: clean
	rm -rf $(VENV)
