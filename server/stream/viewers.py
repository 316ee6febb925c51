"""Viewers: more people watching one session, receive-only (WHEP style), sharing one encode.

The session's own viewer has its encoder, which follows its link. Every added viewer
gets the same H.264: a SharedEncoder takes each tick's access unit from the session's
VideoPath (server/stream/video_path.py: raw pictures compressed once on a thread of their
own, or the Ray engine's units passed on as they are) and hands the unit of tick k to
every viewer's track at tick k; aiortc packetises the units as they are. A keyframe
request (PLI, FIR) from any viewer, or a viewer joining, makes the next unit a keyframe.
Audio is each viewer's own Opus, from the same playout.

Weak on purpose: the shared stream has one rate (the configured ceiling); a viewer on
a narrow link gets no rate of its own.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import secrets
from collections import OrderedDict

import av
from aiortc import RTCPeerConnection

from media.clock import FPS, VIDEO_CLOCK
from server.stream.playout import Playout
from server.stream.tracks import AvatarAudioTrack, AvatarVideoTrack

log = logging.getLogger("server.stream.viewers")
UNITS_KEPT = 16  # ticks whose units a late viewer track may still ask for
UNIT_WAIT_S = 0.5


class SharedEncoder:
    """One H.264 stream of a session's ticks for every added viewer (and a WHIP publisher):
    each tick's unit from the session's VideoPath (compressed once here, or the engine's own),
    kept a few ticks for the viewers' tracks to take."""

    def __init__(self, playout: Playout, rate: int):
        self.playout, self.rate = playout, rate
        self._loop = asyncio.get_running_loop()
        self._units: OrderedDict[int, asyncio.Future[bytes]] = OrderedDict()
        self._source = playout.path.viewer_units(rate, self._deliver)
        playout.taps.append(self._source.tap)

    def want_keyframe(self) -> None:
        self._source.want_keyframe()

    async def unit(self, tick: int) -> bytes:
        """Tick's access unit; empty when it did not come in time (aiortc then sends nothing)."""
        try:
            return await asyncio.wait_for(asyncio.shield(self._future(tick)), UNIT_WAIT_S)
        except TimeoutError:
            self.want_keyframe()  # the viewers' decoders miss a frame: restart them cleanly
            return b""

    def _future(self, tick: int) -> asyncio.Future[bytes]:
        if tick not in self._units:
            self._units[tick] = self._loop.create_future()
            while len(self._units) > UNITS_KEPT:
                _, old = self._units.popitem(last=False)
                old.cancel()
        return self._units[tick]

    def _deliver(self, tick: int, unit: bytes) -> None:
        future = self._future(tick)
        if not future.done():
            future.set_result(unit)

    def close(self) -> None:
        self.playout.taps.remove(self._source.tap)
        self._source.close()


class SharedVideoTrack(AvatarVideoTrack):
    """An added viewer's picture: the shared encoder's unit for each tick."""

    def __init__(self, playout: Playout, shared: SharedEncoder):
        super().__init__(playout, shared.rate)
        self.shared = shared
        self.keyframe_wanted = shared.want_keyframe

    async def recv(self) -> av.Packet:
        tick = await self._wait_unit()
        self.playout.video(tick)  # the tick happens (and is tapped) whichever track asks first
        packet = av.Packet(await self.shared.unit(tick))
        packet.pts, packet.time_base = tick * (VIDEO_CLOCK // FPS), fractions.Fraction(1, VIDEO_CLOCK)
        return packet


class Viewer:
    """One added viewer: its peer connection and tracks."""

    def __init__(self, pc: RTCPeerConnection, playout: Playout, shared: SharedEncoder):
        self.id = secrets.token_hex(8)
        self.pc = pc
        self.video = SharedVideoTrack(playout, shared)
        self.audio = AvatarAudioTrack(playout)

    async def close(self) -> None:
        self.video.stop()
        self.audio.stop()
        await self.pc.close()
