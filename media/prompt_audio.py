"""A microphone heard as its packets arrive.

aiortc's audio receiver holds four packets back (its JitterBuffer's prefetch: a packet
comes out when the fourth after it arrives), 80 ms of smoothing for a listener who plays
the sound. The server does not play a user's microphone: its VAD and recogniser read it,
and every one of those 80 ms delayed the end of a turn, and so the answer. This buffer
hands each packet on at once; one that arrives after a newer one was handed on is dropped
(20 ms missing from what the VAD hears, where playing it late would reorder the sound).
"""

from __future__ import annotations

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

from media import aiortc_hooks


class PromptAudioBuffer(JitterBuffer):
    """Each audio packet out as it comes in (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(capacity=16)  # aiortc's audio capacity; nothing is held here
        self._newest: int | None = None  # sequence number of the latest packet handed on
        self.dropped = 0

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        if self._newest is not None and not 0 < (packet.sequence_number - self._newest) % 2**16 < 2**15:
            self.dropped += 1  # late (or a duplicate): its moment has passed
            return False, None
        self._newest = packet.sequence_number
        return False, JitterFrame(data=packet._data, timestamp=packet.timestamp)  # type: ignore[attr-defined]


def listen_promptly(receiver) -> bool:
    """Give an aiortc audio RTCRtpReceiver this buffer; False where aiortc's internals differ."""
    return aiortc_hooks.replace_jitter_buffer(receiver, PromptAudioBuffer())
