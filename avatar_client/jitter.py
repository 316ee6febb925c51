"""A video jitter buffer that gives up on a lost packet, as browsers do.

aiortc's receiver waits for every missing packet until 512 later ones have arrived: on a
narrow link (25-40 packets a second) a packet that no retransmission brings back freezes
the picture for 13-20 s (measured in tests/integration/test_congestion.py). Its NACKs are
sent only when a new gap opens, and the sender keeps only the last 128 packets, so after
a burst of losses some never come back. Browsers stop waiting after a short time and ask
for a keyframe; this buffer does the same, and passes no frame to the decoder until that
keyframe, so the viewer sees the last good picture rather than a smeared one.
"""

from __future__ import annotations

import logging

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

from media import aiortc_hooks

logger = logging.getLogger(__name__)
VIDEO_CLOCK = 90_000
GIVE_UP_S = 0.3  # a few retransmission round trips through a queue of 100-200 ms
KEYFRAME_WAIT_S = 1.0  # asked again only after this: giving up mid-keyframe would lose it too
NAL_IDR = 5


def is_h264_keyframe(data: bytes) -> bool:
    """True when Annex-B H.264 data holds an IDR slice (aiortc depayloads to Annex B)."""
    at = data.find(b"\x00\x00\x01")
    while at >= 0 and at + 3 < len(data):
        if data[at + 3] & 0x1F == NAL_IDR:
            return True
        at = data.find(b"\x00\x00\x01", at + 3)
    return False


class LossTolerantJitterBuffer(JitterBuffer):
    """aiortc's JitterBuffer, which drops a stalled frame after GIVE_UP_S and waits for a keyframe."""

    def __init__(self, capacity: int = 512) -> None:
        super().__init__(capacity=capacity, is_video=True)
        self._last_out: int | None = None  # RTP timestamp of the newest packet when a frame last came out
        self._awaiting_keyframe = False
        self.gave_up = 0

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        pli, frame = super().add(packet)
        while frame is not None and self._awaiting_keyframe:
            if is_h264_keyframe(frame.data):
                self._awaiting_keyframe = False
            else:
                frame = self._remove_frame(packet.sequence_number)  # the next complete one, if any
        if frame is not None or self._last_out is None:
            self._last_out = packet.timestamp
        elif _ticks_after(packet.timestamp, self._last_out) > self._patience * VIDEO_CLOCK:
            self._give_up()
            pli = True
        return pli, frame

    @property
    def _patience(self) -> float:
        return KEYFRAME_WAIT_S if self._awaiting_keyframe else GIVE_UP_S

    def _give_up(self) -> None:
        """Forget everything held: it cannot be decoded without the packet that never came."""
        self.remove(self.capacity)
        self._origin = None
        self._last_out = None
        self._awaiting_keyframe = True
        self.gave_up += 1
        logger.info("video packet lost for good: waiting for a keyframe")


def _ticks_after(newer: int, older: int) -> int:
    """How far `newer` is after `older` on the 32-bit RTP clock (negative when before)."""
    delta = (newer - older) % 2**32
    return delta - 2**32 if delta >= 2**31 else delta


def tolerate_loss(receiver) -> bool:
    """Give an aiortc video RTCRtpReceiver this buffer; False where aiortc's internals differ."""
    return aiortc_hooks.replace_jitter_buffer(receiver, LossTolerantJitterBuffer())
