"""The server hears a microphone's packets as they arrive (media/prompt_audio.py; a real
receiver takes the buffer: tests/unit/test_aiortc_hooks.py)."""

from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from media.prompt_audio import PromptAudioBuffer


def _packet(seq: int) -> RtpPacket:
    packet = RtpPacket(payload_type=111, sequence_number=seq % 2**16, timestamp=seq * 960 % 2**32)
    packet._data = bytes([seq % 256])  # as aiortc's receiver sets it, depayloaded
    return packet


def _out(buffer, seqs: list[int]) -> list[int]:
    return [frame.data[0] for seq in seqs if (frame := buffer.add(_packet(seq))[1]) is not None]


def test_aiortcs_audio_buffer_holds_four_packets_back():
    stock = JitterBuffer(capacity=16, prefetch=4)  # what aiortc's audio receiver makes
    assert _out(stock, list(range(10))) == list(range(6)), "packet n comes out when n + 4 arrives: 80 ms late"


def test_each_packet_comes_out_as_it_arrives_and_a_late_one_is_dropped():
    buffer = PromptAudioBuffer()
    assert _out(buffer, [1, 2, 3]) == [1, 2, 3]
    assert _out(buffer, [5, 4, 5, 6]) == [5, 6], "4 came after 5 was heard, and 5 came twice"
    assert buffer.dropped == 2
    wrapping = PromptAudioBuffer()
    assert _out(wrapping, [2**16 - 2, 2**16 - 1, 2**16, 2**16 - 1, 2**16 + 1]) == [254, 255, 0, 1], "16 bits wrap"

