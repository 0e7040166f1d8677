"""On the stock Unicorn wheel, watchpoints over RAM pages without code are found through a
window of pkasim's TLB instead of memory hooks (emulator/native/watchwindow.c); code run
from a watched page puts them back on memory hooks, and the core's own stores to that
code still change its timing. Hits, stops and counts are compared with pkasim's engine
in tests/test_engine.py; these check which path is taken. The engine is chosen once per
process, so the stock wheel runs in a child."""

from __future__ import annotations

import pytest
from stock_util import on_stock_wheel

MULS = 0x4340  # muls r0, r0, r0

CHILD = r"""
import dataclasses, io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
config = load_config()
config = dataclasses.replace(config, core=dataclasses.replace(config.core, muls_cycles=32))
out = {"engine": engine.selected()}
m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[1])
m.run(until="main", max_cycles=10**5)
watch = m._loop.watch
before = m.call("smc_target")
spot = m.image.symbol("buf").address + 0x40  # the SRAM code's page, REACH bytes above its base
m.add_watchpoint(spot, 4, "write")  # code ran from its page already
out["code_page_windowed"] = watch.windowed
m.remove_watchpoint(spot, 4, "write")

m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[1])
m.run(until="main", max_cycles=10**5)
watch = m._loop.watch
m.add_watchpoint(spot, 4, "write")  # no code has run from its page yet
out["windowed"] = watch.windowed
out["first"] = m.call("smc_target")  # code runs from the watched page
out["windowed_after_code"] = watch.windowed
m.call("smc_patch", int(sys.argv[2]))  # the core's own store over that code
out["patched"], out["r0"] = m.call("smc_target"), m.reg("r0")
out["before"] = before

# kernels: its checksum word shares a page with its arrays, accessed every few cycles
for name, spot in (("hot", "kernels_checksum"), ("cold", 0x20003000)):
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(sys.argv[3])
    m.write_symbol("iterations", (2).to_bytes(4, "little"))
    m.add_watchpoint(spot, 4, "write")
    while m.run(max_cycles=10**8).watch is not None:
        pass
    out[name] = m._loop.watch.windowed
out["frees_pending"] = len(m.core.on_free)
m.core.free()  # what the machine does when it goes
out["frees_left"] = len(m.core.on_free)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def stock(elf) -> dict:
    return on_stock_wheel(CHILD, elf("anywhere"), MULS, elf("kernels"))


def test_a_watchpoint_on_a_ram_page_without_code_takes_the_window_on_the_stock_wheel(stock):
    assert stock["windowed"]


def test_a_watchpoint_on_a_page_code_ran_from_takes_memory_hooks(stock):
    assert not stock["code_page_windowed"]


def test_code_run_from_a_watched_page_puts_the_watchpoints_on_memory_hooks(stock):
    assert stock["first"] == stock["before"] and not stock["windowed_after_code"]


def test_code_the_core_rewrites_on_a_watched_page_is_timed_as_rewritten(stock):
    assert stock["patched"] == stock["before"] + 31 and stock["r0"] == 1


def test_a_watched_page_accessed_every_few_cycles_goes_back_to_memory_hooks(stock):
    assert not stock["hot"]


def test_a_watched_page_seldom_accessed_stays_behind_the_window(stock):
    assert stock["cold"]


def test_the_watch_window_is_freed_with_its_machine(stock):
    assert stock["frees_pending"] == 1 and stock["frees_left"] == 0
