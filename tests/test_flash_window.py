"""On the stock Unicorn wheel, flash data reads cost their wait states through a window
of pkasim's TLB (emulator/core/flashreads.py, flashalias.c), with no memory hook; a
memory hook over flash brings the read hook back while it exists. The engine is chosen
once per process, so the stock wheel runs in a child."""

from __future__ import annotations

import pytest
from stock_util import on_stock_wheel

CHILD = r"""
import dataclasses, io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
config = load_config()
config = dataclasses.replace(config, memory={**config.memory,
                                             "flash": dataclasses.replace(config.flash, wait_states=1)})
def machine():
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(sys.argv[1])
    m.write_symbol("iterations", (1).to_bytes(4, "little"))
    return m
out = {"engine": engine.selected()}
m = machine()
out["window"] = m.core.flash_reads.by_window
out["plain"] = m.run(max_cycles=10**8).cycles
m = machine()
table = m.image.symbol("haystack").address
m.add_watchpoint(table + 0x10, 4, "read")
out["flash_watch_window"] = m.core.flash_reads.by_window
m.remove_watchpoint(table + 0x10, 4, "read")
out["removed_window"] = m.core.flash_reads.by_window
m.add_watchpoint("kernels_checksum", 4, "write")
out["sram_watch_window"] = m.core.flash_reads.by_window
while True:
    r = m.run(max_cycles=10**8)
    if r.watch is None:
        break
out["sram_watched"] = r.cycles
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def stock(elf) -> dict:
    return on_stock_wheel(CHILD, elf("kernels"))


def test_flash_data_reads_take_the_window_and_no_memory_hook_on_the_stock_wheel(stock):
    assert stock["window"]


def test_a_watchpoint_over_flash_brings_the_read_hook_back_while_it_exists(stock):
    assert not stock["flash_watch_window"] and stock["removed_window"]


def test_a_watchpoint_in_sram_keeps_the_window_and_the_count(stock):
    assert stock["sram_watch_window"] and stock["sram_watched"] == stock["plain"]
