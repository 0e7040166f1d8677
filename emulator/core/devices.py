"""Devices of a chip, built from its description and wired to the NVIC.

The ARMv6-M core always has an NVIC and an SCB (a chip file may omit them); the
others (SysTick, the PKA) come from the chip file's ``peripherals`` with their IRQ
wiring. Each model is given a Clock and an IRQ line, never the core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pkasim.base.clock import Clock
from pkasim.base.errors import LoadError
from pkasim.chip.config import ARCHITECTURAL, ChipConfig, PeripheralConfig
from pkasim.peripherals.base import Peripheral
from pkasim.peripherals.nvic import SYSTICK, Nvic
from pkasim.peripherals.scb import Scb
from pkasim.peripherals.systick import SysTick


@dataclass
class Devices:
    nvic: Nvic
    scb: Scb
    all: dict[str, Peripheral]


def build_devices(config: ChipConfig, clock: Clock, *, active_exception: Callable[[], int]) -> Devices:
    """Every device of the chip, by name; the NVIC and SCB always among them."""
    devices: dict[str, Peripheral] = {}
    nvic: Nvic | None = None
    for pc in config.peripherals.values():
        if pc.type == "nvic":
            nvic = Nvic(pc.name, pc.base, irqs=config.core.irqs)
            devices[pc.name] = nvic
    if nvic is None:
        # The NVIC is part of every ARMv6-M core; a config may omit it.
        nvic = Nvic("nvic", ARCHITECTURAL["nvic"], irqs=config.core.irqs)
        devices["nvic"] = nvic
    irq_for: dict[str, Callable[[], None]] = {"systick": lambda: nvic.set_pending(SYSTICK)}
    scb: Scb | None = None
    for pc in config.peripherals.values():
        irq = None
        if pc.irq is not None:
            irq = irq_for.get(pc.irq) if isinstance(pc.irq, str) else nvic.irq_line(pc.irq)
        if pc.type == "nvic":
            continue
        if pc.type == "systick":
            dev: Peripheral = SysTick(pc.name, pc.base, clock, irq or irq_for["systick"],
                                      reference_clock_hz=pc.params.get("reference_clock_hz"))
        elif pc.type == "scb":
            scb = Scb(pc.name, pc.base, nvic, cpuid=int(pc.params.get("cpuid", 0x410CC200)),
                      has_vtor=config.core.vtor, vtor_reset=config.flash.base, active_exception=active_exception)
            dev = scb
        else:
            dev = _build_extra(config, pc, clock, irq)
        devices[pc.name] = dev
    if scb is None:
        scb = Scb("scb", ARCHITECTURAL["scb"], nvic, has_vtor=config.core.vtor, vtor_reset=config.flash.base,
                  active_exception=active_exception)
        devices["scb"] = scb
    return Devices(nvic, scb, devices)


def _build_extra(config: ChipConfig, pc: PeripheralConfig, clock: Clock, irq: Callable[[], None] | None) -> Peripheral:
    """Devices beyond the ARMv6-M core's own: each model builds itself from its config."""
    if pc.type == "pka":
        from pkasim.peripherals.pka import Pka

        return Pka.from_config(pc, clock=clock, irq=irq or (lambda: None))
    if pc.type == "usb":
        from pkasim.peripherals.usb import Usb

        return Usb.from_config(pc, clock=clock, irq=irq or (lambda: None))
    if pc.type == "trng":
        from pkasim.peripherals.trng import Trng

        return Trng.from_config(pc, clock=clock, irq=irq or (lambda: None))
    raise LoadError(f"{config.source}: peripherals.{pc.name}: type '{pc.type}' has no model")
