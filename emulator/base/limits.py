"""Every limit pkasim puts on what it is given, stated once, each with its reason.

Users feed pkasim chip files they wrote, ELFs from any toolchain, command lines from
scripts and firmware that misbehaves on purpose. Each input is checked against these
figures where it enters (config.py, loader.py, cli.py, the peripheral models), so a
hostile input gets one line and a documented exit code instead of a hang, a crash or
a silently wrapped value. docs/robustness.md lists them for users, with the measured
host memory they imply.
"""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20

# --------------------------------------------------------------------------- chip files (YAML)

# One chip file, and each file it extends. The reference chip file is 3 KiB.
CONFIG_MAX_BYTES = 1 * MiB
# Files in one ``extends:`` chain, the overlay included. The shipped presets use 3.
CONFIG_MAX_EXTENDS = 16
# Nesting of mappings and lists. The schema needs 5 (peripherals.pka.timing.montmul[i]
# under the top level); a deeper file is refused before it is composed, so neither
# PyYAML's recursive composer nor the schema can run out of stack.
CONFIG_MAX_DEPTH = 16
# YAML nodes once aliases are expanded (the reference file has about 80). A file whose
# aliases multiply it beyond this ("billion laughs") is refused while it is parsed,
# in time proportional to its length, never to its expansion.
CONFIG_MAX_NODES = 10_000
# Characters in one key or value. Longer numbers cannot be meant and would reach
# Python's int() conversion limit (4300 digits).
CONFIG_MAX_SCALAR_CHARS = 1024
# A region or peripheral name: a plain identifier, so ``file:line: key.path:`` stays
# unambiguous and names work as linker-script region names.
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,63}"

# --------------------------------------------------------------------------- core

# core.clock_hz and a SysTick reference clock: the firmware reads the clock as a 32-bit
# value (semihosting SYS_TICKFREQ answers in r0; the images' core_clock_hz is a
# uint32_t), so 4,294,967,295 Hz is the largest a run can report truthfully.
CLOCK_HZ_MAX = (1 << 32) - 1
# core.muls_cycles: DDI0432C table 3-1, MULS is a 1-cycle or a 32-cycle build option.
MULS_CYCLES = (1, 32)
# core.irqs: the ARMv6-M NVIC has 1 to 32 external interrupt lines.
IRQS_MIN, IRQS_MAX = 1, 32
# core.exception_entry_cycles / exception_return_cycles. The core's figure is 16 and
# 0; the 64-bit cycle counter could only wrap after 2^48 exceptions at this maximum.
EXCEPTION_CYCLES_MAX = (1 << 16) - 1

# --------------------------------------------------------------------------- memory

# Memory regions are mapped in 1 KiB pages (base and size multiples of it).
REGION_ALIGN = 1 * KiB
# The decoder keeps each instruction's cost in 16 bits (thumb.h's pk_insn.cost).
INSTRUCTION_COST_MAX = 0xFFFF
# The dearest instruction at zero wait states: MULS on the 32-cycle multiplier
# (POP {r0-r7, pc} is 12, BL 4).
INSTRUCTION_BASE_COST_MAX = 32
# Flash wait states are added once per fetched word, so the dearest instruction costs
# 32 + wait_states: at most 65,503 wait states keep every cost representable exactly.
WAIT_STATES_MAX = INSTRUCTION_COST_MAX - INSTRUCTION_BASE_COST_MAX
# All memory regions together, flash included: the host keeps a copy of each, about
# 1 MiB of host memory per MiB (measured in docs/robustness.md; the code cache grows
# with the code that runs, not with the size of flash).
MEMORY_MAX_BYTES = 256 * MiB

# --------------------------------------------------------------------------- peripherals

# Peripheral registers are words: a window starts on a word boundary.
PERIPHERAL_ALIGN = 4
# One PKA operation: LASTCYC reports its busy cycles in a 32-bit register.
PKA_OPERATION_CYCLES_MAX = (1 << 32) - 1

# --------------------------------------------------------------------------- the command line

# --max-cycles: the cycle counter is 64-bit.
MAX_CYCLES_MAX = (1 << 64) - 1
# An ELF file (pkasim reads only its headers, segments, sections and symbols; a
# firmware ELF with full debug information is a few MiB).
ELF_MAX_BYTES = 256 * MiB
# A profile JSON for `pkasim diff` (one row per function: a large image's is a few
# hundred KiB).
PROFILE_MAX_BYTES = 64 * MiB

# --------------------------------------------------------------------------- other files from user paths
# Each is read with emulator/base/userfiles.py: at most the limit + 1 byte (a longer file, or
# /dev/zero, is refused without being read whole), never blocking on a FIFO.

# A PEM private key (`pkasim sign --key`, rsakey.RsaKey.load_pem): an RSA-4096 key is 3.2 KiB.
KEY_MAX_BYTES = 64 * KiB
# The file `pkasim sign --message` signs: it is hashed on the host, but held in memory whole.
MESSAGE_MAX_BYTES = 64 * MiB
# `pkasim apdu --file` (or stdin): APDUs of at most 1590 bytes, as hex lines.
APDU_FILE_MAX_BYTES = 1 * MiB
# `pkasim debug --commands` (or stdin): one command a line.
SCRIPT_MAX_BYTES = 1 * MiB
# A `pkasim regress` baseline: some hundred metrics, a few KiB.
BASELINE_MAX_BYTES = 16 * MiB
# A source file the debugger shows (its name comes from the ELF's DWARF).
SOURCE_MAX_BYTES = 16 * MiB

# --------------------------------------------------------------------------- power analysis (docs/power.md)

# `pkasim power` and `tvla --traces`: the campaign is streamed (a TVLA keeps moments, not
# traces), so this bounds the time asked for, not memory.
POWER_TRACES_MAX = 100_000_000
# Samples (cycles) of one trace's window: a TVLA keeps five float64 sums per sample and
# group (320 MiB at this size), a chunk of traces 32 MiB.
POWER_WINDOW_MAX_CYCLES = 1 << 22
# Pairs of samples of a bivariate TVLA (`tvla --order 2 --pairs D`): four float64
# co-moments per pair and group (32 MiB per group at this size), sent back by every chunk.
POWER_PAIRS_MAX = 1 << 20
# One `--fixed SYMBOL=HEX` value, in bytes (an object is at most a memory region anyway).
POWER_FIXED_MAX_BYTES = 1 << 16
# A weight of the chip file's power: section (a larger one is a typo, not a model).
POWER_WEIGHT_MAX = 1_000_000
