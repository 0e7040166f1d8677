"""GDB remote protocol framing (emulator/debugger/gdbserver/packets.py), alone:
frames, checksums, escapes, run-length encoding, interrupts, and input it refuses."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pkasim.debugger.gdbserver.packets import (
    MAX_PACKET,
    Ack,
    Bad,
    Interrupt,
    Packet,
    Reader,
    checksum,
    decode,
    frame,
)


def test_a_packet_is_dollar_data_hash_and_the_checksum():
    assert frame("OK") == b"$OK#9a"
    assert checksum(b"OK") == 0x9A


def test_a_well_formed_packet_is_read_whole_across_chunks():
    r = Reader()
    assert r.feed(b"$qSupp") == []
    assert r.feed(b"orted#37") == [Packet(b"qSupported")]


def test_acks_and_ctrl_c_between_packets_are_events():
    assert Reader().feed(b"+-\x03") == [Ack(True), Ack(False), Interrupt()]


def test_a_bad_checksum_asks_for_the_packet_again():
    (ev,) = Reader().feed(b"$g#00")
    assert isinstance(ev, Bad) and ev.nak and "checksum" in ev.reason


def test_a_checksum_that_is_not_hex_asks_for_the_packet_again():
    (ev,) = Reader().feed(b"$g#zz")
    assert isinstance(ev, Bad) and ev.nak


def test_an_oversized_packet_is_refused_and_the_next_one_is_read():
    big = b"X" * (3 * MAX_PACKET)
    events = Reader().feed(b"$" + big + b"#%02x" % checksum(big) + frame("g"))
    assert isinstance(events[0], Bad) and not events[0].nak and "longer" in events[0].reason
    assert events[1] == Packet(b"g")


def test_a_packet_restarted_midway_is_dropped_for_the_new_one():
    events = Reader().feed(b"$m0,4" + frame("?"))
    assert isinstance(events[0], Bad) and events[1] == Packet(b"?")


def test_a_broken_escape_is_refused():
    raw = b"X0,1:}"
    (ev,) = Reader().feed(b"$" + raw + b"#%02x" % checksum(raw))
    assert isinstance(ev, Bad) and not ev.nak


def test_run_length_encoding_repeats_the_previous_byte():
    assert decode(b"0* ") == b"0" * 4  # ' ' is 32: three more
    assert decode(b"}]") == b"}"


def test_noise_between_packets_is_ignored():
    assert Reader().feed(b"garbage%Stop:T05#00" + frame("g")) == [Packet(b"g")]


@given(st.binary(max_size=300))
def test_any_payload_survives_framing(data):
    assert Reader().feed(frame(data)) == [Packet(data)]


@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_raise(data):
    for ev in Reader().feed(data):
        assert isinstance(ev, (Packet, Bad, Interrupt, Ack))
