"""Viewers: more people watching one session, receive-only (WHEP style), sharing one encode.

The session's own viewer has its encoder, which follows its link. Every added viewer
gets the same H.264: a SharedEncoder taps the Playout's ticks, encodes each picture once
on a thread of its own (the event loop only queues), and hands the access unit of tick
k to every viewer's track at tick k. With the Ray engine the units come encoded from the
engine's node already: they are passed on as they are (at the first viewer's rate), and
keyframe requests go to the engine. aiortc packetises the units as they are, as with
the Ray engine's. A keyframe request (PLI, FIR) from any viewer, or a viewer joining,
makes the next unit a keyframe. Audio is each viewer's own Opus, from the same playout.

Weak on purpose: the shared stream has one rate (the configured ceiling); a viewer on
a narrow link gets no rate of its own.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import queue
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable

import av
import numpy as np
from aiortc import RTCPeerConnection

from media.clock import FPS, VIDEO_CLOCK
from media.h264 import FrameEncoder
from server.stream.playout import Playout, put_dropping_oldest
from server.stream.tracks import AvatarAudioTrack, AvatarVideoTrack

log = logging.getLogger("server.stream.viewers")
QUEUE_TICKS = 8  # pictures waiting for the encoder; more means it fell behind: the oldest go
UNITS_KEPT = 16  # ticks whose units a late viewer track may still ask for
UNIT_WAIT_S = 0.5


class SharedEncoder:
    """One H.264 encode of a session's ticks, on its own thread, handed to every added viewer
    (and a WHIP publisher)."""

    def __init__(self, playout: Playout, rate: int, engine_keyframe: Callable[[], None] = lambda: None):
        self.playout, self.rate, self._engine_keyframe = playout, rate, engine_keyframe
        self._loop = asyncio.get_running_loop()
        self._units: OrderedDict[int, asyncio.Future[bytes]] = OrderedDict()
        self._pictures: queue.Queue[tuple[int, np.ndarray] | None] = queue.Queue(QUEUE_TICKS)
        self._keyframe = threading.Event()
        if not playout.encoded:  # the Ray engine's units come encoded: nothing to do on a thread
            threading.Thread(target=self._run, name="shared-encoder", daemon=True).start()
        playout.taps.append(self.tap)

    def tap(self, tick: int, video: av.VideoFrame | bytes, pcm: np.ndarray) -> None:
        if isinstance(video, bytes):  # encoded on the engine's node: nothing to encode here
            self._deliver(tick, video)
            return
        if put_dropping_oldest(self._pictures, (tick, video.to_ndarray())):  # the encoder is behind: the oldest
            self._keyframe.set()  # picture went, so the next unit must be a keyframe

    def want_keyframe(self) -> None:
        self._keyframe.set()
        if self.playout.encoded:
            self._engine_keyframe()

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

    def _run(self) -> None:
        encoder = FrameEncoder()
        while (item := self._pictures.get()) is not None:
            tick, i420 = item
            keyframe = self._keyframe.is_set()
            self._keyframe.clear()
            unit = encoder.encode(i420, self.rate, keyframe)
            self._loop.call_soon_threadsafe(self._deliver, tick, unit)

    def close(self) -> None:
        self.playout.taps.remove(self.tap)
        put_dropping_oldest(self._pictures, None)  # the end marker: what was queued is of no use now


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
