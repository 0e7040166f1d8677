"""The USB device model, the wire's timing, the host's frame schedule and the trimmed
oscillator, without a CPU: a bare Clock whose time the test advances event by event."""

from __future__ import annotations

import math

import pytest

from pkasim.base.clock import Clock
from pkasim.base.errors import ConfigError
from pkasim.peripherals.osc48 import TrimmedOscillator
from pkasim.peripherals.usb import ACK, NAK, P_ARM, P_STALL, STALL, Usb
from pkasim.usb import wire
from pkasim.usb.host import MAX_BULK_PER_FRAME, UsbHost

HZ = 48_000_000


class Counter:
    cycles = 0


def make(irq=lambda: None, **osc) -> tuple[Clock, Usb]:
    src = Counter()
    clock = Clock(src, HZ)
    dev = Usb("usb", 0x40020000, clock, irq, TrimmedOscillator(HZ, **osc))
    dev.write(0x00, 4, 1)  # CONNECT
    return clock, dev


def run_events(clock: Clock, until_cycle: int) -> None:
    while True:
        at = clock.next_deadline()
        if at is None or at > until_cycle:
            clock._source.cycles = until_cycle
            return
        clock._source.cycles = max(at, clock.now)
        clock.run_due()


# ------------------------------------------------------------------ the wire
def test_a_64_byte_zero_packet_is_548_bits_on_the_wire() -> None:
    # SYNC 8 + PID 8 + 512 data + CRC16 16 + EOP 3 = 547, and one stuffed bit in the CRC of zeros
    assert wire.data_bits(wire.PID_DATA0, bytes(64)) == 547 + wire.stuffed(
        wire._bits([(wire.SYNC, 8), (wire.PID_DATA0, 8), *((0, 8) for _ in range(64)),
                    (wire.crc16(bytes(64)), 16)]))


def test_bit_stuffing_adds_a_zero_after_every_six_ones() -> None:
    assert wire.stuffed([1] * 6) == 1
    assert wire.stuffed([1] * 12) == 2
    assert wire.stuffed([1, 1, 1, 1, 1, 0, 1]) == 0
    assert wire.data_bits(wire.PID_DATA0, b"\xff" * 64) > wire.data_bits(wire.PID_DATA0, bytes(64)) + 80


def test_data_crc_is_crc16_usb() -> None:
    assert wire.crc16(b"123456789") == 0xB4C8  # the CRC-16/USB check value


# ------------------------------------------------------------------ registers and handshakes
def test_out_naks_until_the_firmware_arms_the_pipe() -> None:
    _, dev = make()
    assert dev.out(0, 1, b"abc") == NAK
    dev.write(0x28, 4, P_ARM)  # PIPE2: EP1 OUT
    assert dev.out(0, 1, b"abc") == ACK
    assert dev.read(0x28, 4) & 0x7F == 3 and not dev.read(0x28, 4) & P_ARM
    assert dev.read(0x100 + 2 * 0x40, 4) & 0xFFFFFF == int.from_bytes(b"abc", "little")


def test_in_naks_until_armed_and_the_ack_frees_the_pipe_and_raises_its_interrupt() -> None:
    fired = []
    _, dev = make(irq=lambda: fired.append(1))
    dev.write(0x08, 4, 1 << (8 + 3))  # IER: PIPE3
    assert dev.in_(0, 1) == (NAK, b"")
    dev.write(0x100 + 3 * 0x40, 4, 0x04030201)
    dev.write(0x2C, 4, P_ARM | 4)
    assert dev.in_(0, 1) == (ACK, b"\x01\x02\x03\x04")
    assert dev.read(0x2C, 4) & P_ARM  # still armed while the data is on the wire
    dev.in_ack(1)
    assert not dev.read(0x2C, 4) & P_ARM
    assert dev.read(0x04, 4) & (1 << 11) and fired == [1]


def test_a_stalled_endpoint_answers_stall_and_setup_clears_ep0_stalls() -> None:
    _, dev = make()
    dev.write(0x24, 4, P_STALL)  # PIPE1: EP0 IN
    assert dev.in_(0, 0) == (STALL, b"")
    assert dev.setup(0, bytes(8)) == ACK
    assert not dev.read(0x24, 4) & P_STALL


def test_sof_sets_the_frame_number_and_its_interrupt_bit() -> None:
    _, dev = make()
    dev.sof(0x7FF, 0.0)
    assert dev.read(0x0C, 4) == 0x7FF and dev.read(0x04, 4) & 2


def test_the_device_ignores_another_address() -> None:
    _, dev = make()
    dev.write(0x10, 4, 5)
    assert dev.out(0, 1, b"") is None and dev.in_(5, 1) == (NAK, b"")


# ------------------------------------------------------------------ the host's frames
def _instant_firmware(dev: Usb) -> None:
    """A device whose firmware re-arms EP1 OUT the moment a packet arrives."""
    dev.write(0x28, 4, P_ARM)

    def irq() -> None:
        if dev.istr & (1 << 10):
            dev.istr &= ~(1 << 10)
            dev.write(0x28, 4, P_ARM)

    dev.irq = irq
    dev.write(0x08, 4, 1 << 10)


def test_at_most_19_bulk_packets_of_64_bytes_go_in_one_frame() -> None:
    clock, dev = make()
    _instant_firmware(dev)
    host = UsbHost(clock, dev)
    host.port_enabled = True
    host.start()
    done = []
    host.submit(host.bulk_out(1, bytes(64 * 50)), lambda v, e: done.append((v, e)))
    run_events(clock, 10 * 48_000)
    assert done == [(64 * 50, None)]
    per_frame: dict[int, int] = {}
    for p in host.log:
        if p.kind == "OUT":
            per_frame[p.frame] = per_frame.get(p.frame, 0) + 1
    assert max(per_frame.values()) == MAX_BULK_PER_FRAME
    assert len(per_frame) == math.ceil(51 / MAX_BULK_PER_FRAME)  # 50 packets and the zero-length one


def test_every_transaction_fits_inside_its_frame() -> None:
    clock, dev = make()
    _instant_firmware(dev)
    host = UsbHost(clock, dev)
    host.port_enabled = True
    host.start()
    host.submit(host.bulk_out(1, bytes(64 * 40)), lambda v, e: None)
    run_events(clock, 10 * 48_000)
    for p in host.log:
        frame_start = p.frame * 1e6
        assert frame_start <= p.start_ns and p.end_ns <= frame_start + 1e6


def test_a_nakked_in_goes_at_the_first_retry_slot_after_the_firmware_arms_it() -> None:
    clock, dev = make()
    host = UsbHost(clock, dev)
    host.port_enabled = True
    host.start()
    got = []
    host.submit(host.bulk_in(1, 64), lambda v, e: got.append(v))
    run_events(clock, 48_000 + 24_000)  # half a frame of NAKs
    arm_ns = host.now_ns()
    dev.write(0x2C, 4, P_ARM | 1)
    run_events(clock, 3 * 48_000)
    assert got == [b"\x00"]
    packet = [p for p in host.log if p.kind == "IN"][0]
    period = wire.ns(host._nak_bits("in", 1))
    assert arm_ns <= packet.start_ns < arm_ns + period
    assert packet.naks == math.ceil((arm_ns - host.log[0].end_ns) / period)  # half a frame of NAKs, counted


# ------------------------------------------------------------------ the oscillator
def test_the_default_oscillator_maps_host_time_to_nominal_cycles_exactly() -> None:
    osc = TrimmedOscillator(HZ)
    assert osc.cycle_at(1e6) == 48_000 and osc.cycle_at(wire.BIT_NS) == 4
    assert osc.ns_at(48_000 * 455) == 455e6


def test_a_fast_oscillator_counts_more_cycles_per_host_millisecond() -> None:
    osc = TrimmedOscillator(HZ, error_ppm=2500)
    assert osc.cycle_at(1e9) == 48_120_000


def test_trimming_brings_the_error_within_half_a_step() -> None:
    osc = TrimmedOscillator(HZ, error_ppm=2500, trim=True, trim_step_ppm=1000)
    for ms in range(1, 20):
        osc.sof(ms * 1e6)
    assert abs(osc.error_ppm) <= osc.bound_ppm == 500
    assert osc.trims == 2


def test_with_drift_the_trim_follows_within_its_bound() -> None:
    osc = TrimmedOscillator(HZ, error_ppm=-1800, trim=True, trim_step_ppm=300, drift_ppm_per_s=400,
                            wander_ppm=5, seed=7)
    worst = 0.0
    for ms in range(1, 3000):
        osc.sof(ms * 1e6)
        if ms > 50:
            worst = max(worst, abs(osc.error_ppm))
    assert worst <= osc.bound_ppm


def test_an_unknown_oscillator_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="oscillator.trim_stp: unknown option"):
        TrimmedOscillator.from_params(HZ, {"trim_stp": 5}, "chip.yaml:3")
