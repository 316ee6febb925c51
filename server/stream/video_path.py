"""VideoPath: how a session's pictures travel from its engine to what its tracks send.

One is chosen per session, by what its engine hands over (`RenderSession.frame_format`):

- RawVideo (a local worker: I420 frames in shared memory). Each tick's picture becomes an
  av.VideoFrame that the viewer's own encoder (server/stream/encoder.py) compresses at
  its link's rate; a tick without a fresh frame shows the last one again. Added viewers
  and WHIP share one more encode, on a thread (EncodeForViewers).
- EncodedVideo (a Ray actor: H.264 access units made on its node). A unit goes out as it
  is; a tick without one sends nothing. The units depend on the ones before, so a unit
  that is never sent, or frames dropped before they play, make the next one a keyframe
  (asked of the engine). Added viewers get the same units (PassOnToViewers).

The Playout asks its path for each tick's picture and knows nothing of which path it is.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

import av
import numpy as np

from media.frame_size import FrameSize, frame_dims
from media.h264 import FrameEncoder
from server.engines.client import RenderSession

Picture = np.ndarray | bytes  # a tick's picture for taps: an I420 array, or its access unit (b"": none)
QUEUE_TICKS = 8  # pictures waiting for the viewers' encoder; more means it fell behind: the oldest go


def put_dropping_oldest(to: queue.Queue, item: Any) -> bool:
    """Queue `item` for a thread without waiting: when the queue is full its oldest item
    goes (the caller runs on the event loop and must never block it). Whether one went."""
    dropped = False
    while True:
        try:
            to.put_nowait(item)
            return dropped
        except queue.Full:
            try:
                to.get_nowait()
                dropped = True
            except queue.Empty:  # the thread took one meanwhile
                pass


class ViewerUnits(Protocol):
    """The access units of a session's ticks for its added viewers: fed by a Playout tap."""

    def tap(self, tick: int, picture: Picture, pcm: np.ndarray) -> None: ...

    def want_keyframe(self) -> None: ...

    def close(self) -> None: ...


Deliver = Callable[[int, bytes], None]  # tick, its unit: called on the event loop


class VideoPath(Protocol):
    frames_stand_alone: bool  # any frame may be left out without the next needing to be a keyframe

    def take(self, tick: int, slot: int) -> None:
        """Tick's picture is the engine's frame in `slot` (released by the caller right after)."""

    def sent(self, tick: int) -> av.VideoFrame | av.Packet:
        """What the session's video track sends for tick."""

    def tapped(self, tick: int) -> Picture:
        """Tick's picture for the Playout's taps (broadcasts, added viewers)."""

    def passed(self, tick: int) -> None:
        """No track will ask for tick any more."""

    def frames_dropped(self) -> None:
        """Frames taken from the engine were dropped before they played."""

    def want_keyframe(self) -> None:
        """A receiver lost the picture (a PLI, a new viewer, a publisher starting)."""

    def viewer_units(self, rate: int, deliver: Deliver) -> ViewerUnits: ...


class RawVideo:
    frames_stand_alone = True

    def __init__(self, frame_of: Callable[[int], np.ndarray], size: FrameSize):
        self._frame_of = frame_of
        self._video = av.VideoFrame(*frame_dims(size), "yuv420p")  # the picture held while no fresh one comes

    def take(self, tick: int, slot: int) -> None:
        self._video = av.VideoFrame.from_ndarray(self._frame_of(slot), format="yuv420p")

    def sent(self, tick: int) -> av.VideoFrame:
        return self._video

    def tapped(self, tick: int) -> np.ndarray:
        return self._video.to_ndarray()

    def passed(self, tick: int) -> None:
        pass

    def frames_dropped(self) -> None:
        pass

    def want_keyframe(self) -> None:
        pass  # this process's encoders answer keyframe requests themselves

    def viewer_units(self, rate: int, deliver: Deliver) -> ViewerUnits:
        return EncodeForViewers(rate, deliver)


class EncodedVideo:
    frames_stand_alone = False

    def __init__(self, frame_of: Callable[[int], bytes], want_keyframe: Callable[[], None]):
        self._frame_of, self.want_keyframe = frame_of, want_keyframe
        self._units: dict[int, bytes] = {}  # tick -> its access unit, until the video track takes it

    def take(self, tick: int, slot: int) -> None:
        self._units[tick] = self._frame_of(slot)

    def sent(self, tick: int) -> av.Packet:
        return av.Packet(self._units.pop(tick, b""))

    def tapped(self, tick: int) -> bytes:
        return self._units.get(tick, b"")

    def passed(self, tick: int) -> None:
        if self._units.pop(tick, None) is not None:  # the video track fell behind: a unit never sent
            self.want_keyframe()

    def frames_dropped(self) -> None:
        self.want_keyframe()

    def viewer_units(self, rate: int, deliver: Deliver) -> ViewerUnits:
        return PassOnToViewers(deliver, self.want_keyframe)


class EncodeForViewers:
    """One H.264 encode of the raw pictures for every added viewer, on a thread of its own
    (the event loop only queues), at one rate."""

    def __init__(self, rate: int, deliver: Deliver):
        self.rate, self._deliver = rate, deliver
        self._loop = asyncio.get_running_loop()
        self._pictures: queue.Queue[tuple[int, np.ndarray] | None] = queue.Queue(QUEUE_TICKS)
        self._keyframe = threading.Event()
        threading.Thread(target=self._run, name="shared-encoder", daemon=True).start()

    def tap(self, tick: int, picture: Picture, pcm: np.ndarray) -> None:
        assert isinstance(picture, np.ndarray)
        if put_dropping_oldest(self._pictures, (tick, picture)):  # the encoder is behind: the oldest
            self._keyframe.set()  # picture went, so the next unit must be a keyframe

    def want_keyframe(self) -> None:
        self._keyframe.set()

    def close(self) -> None:
        put_dropping_oldest(self._pictures, None)  # the end marker: what was queued is of no use now

    def _run(self) -> None:
        encoder = FrameEncoder()
        while (item := self._pictures.get()) is not None:
            tick, i420 = item
            keyframe = self._keyframe.is_set()
            self._keyframe.clear()
            unit = encoder.encode(i420, self.rate, keyframe)
            self._loop.call_soon_threadsafe(self._deliver, tick, unit)


class PassOnToViewers:
    """The engine's units, as they are, for every added viewer (at the session's own rate);
    their keyframe requests go to the engine."""

    def __init__(self, deliver: Deliver, want_keyframe: Callable[[], None]):
        self._deliver, self.want_keyframe = deliver, want_keyframe

    def tap(self, tick: int, picture: Picture, pcm: np.ndarray) -> None:
        assert isinstance(picture, bytes)
        self._deliver(tick, picture)

    def close(self) -> None:
        pass


def video_path(engine: RenderSession, size: FrameSize) -> VideoPath:
    """The path for what this engine hands over."""
    if engine.frame_format == "h264":
        return EncodedVideo(engine.frame, engine.want_keyframe)  # type: ignore[arg-type]  # h264: bytes
    return RawVideo(engine.frame, size)  # type: ignore[arg-type]  # i420: arrays
