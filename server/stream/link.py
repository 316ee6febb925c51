"""Following one viewer's link: how much aiortc may resend, and keyframe requests.

The bitrate itself is server/bitrate.py's BitrateControl (the Ray engine's encoders follow it too).

RetransmitLimit bounds what aiortc resends on NACKs: it resends every packet named in
every NACK, and a browser names a missing packet again each round trip, so on a full
link the resends crowd out new packets and the loss feeds itself (measured with
Chromium on a 400 kbit/s link: 30-60 % lost, no frame decoded for 10 s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc.rtp import RTCP_PSFB_FIR, RTCP_PSFB_PLI, RtcpPsfbPacket

from media import aiortc_hooks
from server.bitrate import BitrateControl
from server.token_bucket import TokenBucket

logger = logging.getLogger(__name__)
RESEND_SHARE = 0.2  # of the video's bitrate, at most, goes to resent packets
RESEND_BURST = 8  # packets
RESEND_GAP_S = 0.25  # one packet is resent at most once in this long (about a round trip)
PACKET_BITS = 1200 * 8


class RetransmitLimit:
    """Which NACKed packets to resend: each at most once per RESEND_GAP_S, all within a
    token bucket of RESEND_SHARE of the current bitrate."""

    def __init__(self, control: BitrateControl):
        self.control = control
        self._bucket = TokenBucket(RESEND_BURST, time.monotonic())
        self._resent: dict[int, float] = {}  # sequence number -> when
        self.refused = 0

    def allow(self, sequence_number: int, now: float) -> bool:
        rate = self.control.rate * RESEND_SHARE / PACKET_BITS
        self._bucket.fill(now, rate)
        if now - self._resent.get(sequence_number, -RESEND_GAP_S) < RESEND_GAP_S or not self._bucket.take():
            self.refused += 1
            return False
        self._resent[sequence_number] = now
        if len(self._resent) > 512:  # bounded: forget what is past resending twice
            self._resent = {seq: t for seq, t in self._resent.items() if now - t < RESEND_GAP_S}
        return True


def limit_resends(sender: Any, control: BitrateControl) -> RetransmitLimit | None:
    """Put one aiortc RTCRtpSender's NACK resends under a RetransmitLimit (this sender only)."""
    limit = RetransmitLimit(control)

    def wrap(resend: Callable[[int], Awaitable[None]]) -> Callable[[int], Awaitable[None]]:
        async def limited(sequence_number: int) -> None:
            if limit.allow(sequence_number, time.monotonic()):
                await resend(sequence_number)
        return limited

    return limit if aiortc_hooks.wrap_retransmit(sender, wrap) else None


def relay_keyframe_requests(sender: Any, want_keyframe: Callable[[], None]) -> None:
    """Tell `want_keyframe` of each PLI or FIR the viewer sends this RTCRtpSender. aiortc
    acts on them only for frames it encodes itself; units an engine made on its node
    (AVATAR_ENGINE=ray) need the engine told, or a viewer that lost a frame waits for
    the next periodic keyframe (up to 2 s)."""

    def wrap(handle: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def handled(packet: Any) -> None:
            if isinstance(packet, RtcpPsfbPacket) and packet.fmt in (RTCP_PSFB_PLI, RTCP_PSFB_FIR):
                want_keyframe()
            await handle(packet)
        return handled

    aiortc_hooks.wrap_rtcp(sender, wrap)
