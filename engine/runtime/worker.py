"""EngineWorker: a spawned process that runs Pipelines for the sessions placed on it.

It attaches to its frame ring, preloads the default avatar, says ready, then serves
requests in arrival order. A failure inside one session ends that session with an
error event; the worker goes on serving the others. An avatar it has not loaded yet is
loaded on a helper thread (a video avatar's clip takes ~70 ms a minute to read), so the
sessions already here keep getting frames; the new session opens when it is done.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.core.pipeline import Pipeline
from engine.core.stage import AudioChunk, FrameChunk
from engine.core.state import RollingState
from engine.families.portrait.avatar import DEFAULT_AVATAR, NoFaceError
from engine.runtime.ipc import (
    CloseSessionRequest,
    FrameRing,
    FramesReadyEvent,
    OpenSessionRequest,
    ReadyEvent,
    RenderRequest,
    SessionErrorEvent,
    SessionOpenedEvent,
    ShutdownRequest,
)

log = logging.getLogger("engine.runtime.worker")


IDLE_PIPELINES = 2
LOAD_POLL_S = 0.005


@dataclass
class Placed:
    """A session on this worker: its avatar (which Pipeline) and its RollingState."""

    avatar: str
    state: RollingState


class EngineWorker:
    """Serves one pipe; see the module docstring."""

    def __init__(self, index: int, conn: Connection, ring_name: str, config: EngineConfig):
        self.index, self.conn, self.config = index, conn, config
        self.ring = FrameRing(config.size, config.ring_slots, ring_name)
        # by avatar path: analysis is per avatar, not per session; most recently used last
        self.pipelines: OrderedDict[str, Pipeline] = OrderedDict()
        self.sessions: dict[str, Placed] = {}
        self.preload = config.preload_avatar or str(DEFAULT_AVATAR)
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="avatar-load")
        self._loading: dict[str, Future[Pipeline]] = {}  # avatar -> its load
        self._waiting: dict[str, list[OpenSessionRequest]] = {}  # avatar -> sessions opening on it

    def pipeline(self, avatar: str) -> Pipeline:
        if avatar not in self.pipelines:
            self.pipelines[avatar] = Pipeline.for_avatar(Path(avatar), self.config.motion)
            self.forget_idle()
        self.pipelines.move_to_end(avatar)
        return self.pipelines[avatar]

    def _load(self, avatar: str) -> Pipeline:  # on the loader thread: builds, touches no state
        return Pipeline.for_avatar(Path(avatar), self.config.motion)

    def finish_loads(self) -> None:
        """Open the sessions whose avatar has finished loading (or fail them with its error)."""
        for avatar, future in list(self._loading.items()):
            if not future.done():
                continue
            del self._loading[avatar]
            waiting = self._waiting.pop(avatar, [])
            try:
                self.pipelines[avatar] = future.result()
            except Exception as exc:
                code = "bad_avatar" if isinstance(exc, NoFaceError) else "engine_error"
                log.warning("avatar %s failed to load: %s", avatar, exc)
                for request in waiting:
                    self.conn.send(SessionErrorEvent(request.session_id, code, f"{type(exc).__name__}: {exc}"))
                continue
            for request in waiting:
                self.handle(request)  # opens it now: the pipeline is here
            self.forget_idle()

    def forget_idle(self) -> None:
        """Keep the avatars in use, the preloaded one and IDLE_PIPELINES more: a video
        avatar holds its clip (about 55 MB a minute), so idle ones must not pile up."""
        used = {p.avatar for p in self.sessions.values()} | {self.preload}
        idle = [a for a in self.pipelines if a not in used]
        for avatar in idle[: max(0, len(idle) - IDLE_PIPELINES)]:
            del self.pipelines[avatar]

    def serve(self) -> None:
        self.pipeline(self.preload)
        self.conn.send(ReadyEvent(self.index, os.getpid()))
        try:
            while True:
                # while an avatar loads, look up from the pipe every few ms to open its sessions
                if self._loading and not self.conn.poll(LOAD_POLL_S):
                    self.finish_loads()
                    continue
                message = self.conn.recv()
                if isinstance(message, ShutdownRequest):
                    return
                self.handle(message)
                self.finish_loads()
        finally:
            self._loader.shutdown(wait=False, cancel_futures=True)

    def handle(self, message: object) -> None:
        session = getattr(message, "session_id", "")
        try:
            if isinstance(message, OpenSessionRequest):
                self.open(message)
            elif isinstance(message, RenderRequest):
                self.render(message)
            elif isinstance(message, CloseSessionRequest):
                self.sessions.pop(session, None)
                for waiting in self._waiting.values():
                    waiting[:] = [r for r in waiting if r.session_id != session]
                self.forget_idle()
        except NoFaceError as exc:
            self.conn.send(SessionErrorEvent(session, "bad_avatar", str(exc)))
        except Exception as exc:  # one broken session must not take the worker down
            log.exception("session %s failed", session)
            self.sessions.pop(session, None)
            if isinstance(message, RenderRequest):
                self.give_back(message)
            self.conn.send(SessionErrorEvent(session, "engine_error", f"{type(exc).__name__}: {exc}"))

    def open(self, request: OpenSessionRequest) -> None:
        if request.avatar not in self.pipelines:
            if request.avatar not in self._loading:
                self._loading[request.avatar] = self._loader.submit(self._load, request.avatar)
            self._waiting.setdefault(request.avatar, []).append(request)
            return
        pipeline = self.pipeline(request.avatar)
        self.sessions[request.session_id] = Placed(request.avatar, pipeline.new_state(request.seed))
        self.conn.send(SessionOpenedEvent(request.session_id))

    def render(self, request: RenderRequest) -> None:
        placed = self.sessions.get(request.session_id)
        if placed is None:
            self.give_back(request)  # closed while the request was in flight
            return
        frames = len(request.slots)
        pcm = np.frombuffer(request.pcm, np.int16)
        if len(pcm) != frames * SAMPLES_PER_FRAME:
            raise ValueError(f"chunk has {len(pcm)} samples, expected {frames * SAMPLES_PER_FRAME}")
        chunk = AudioChunk(request.first_frame, frames, pcm)
        self.pipelines[placed.avatar].step(chunk, placed.state, lambda rendered: self.publish(rendered, request))

    def give_back(self, request: RenderRequest) -> None:
        """Every request is answered, rendered or not: the server owns the ring's free
        slots and frees these when the answer comes (and nobody waits for it)."""
        self.conn.send(FramesReadyEvent(request.session_id, request.chunk_id, request.slots))

    def publish(self, chunk: FrameChunk, request: RenderRequest) -> None:
        """Frames into the request's ring slots, then a small event."""
        for slot, frame in zip(request.slots, chunk.frames):
            self.ring.array[slot] = frame
        self.conn.send(FramesReadyEvent(request.session_id, request.chunk_id, request.slots))


def main(index: int, conn: Connection, ring_name: str, config: EngineConfig) -> None:
    """Process entry point (multiprocessing spawn target)."""
    logging.basicConfig(level=logging.INFO, format=f"worker{index} %(levelname)s %(message)s")
    import cv2

    cv2.setNumThreads(1)  # one worker per core; threads inside it only fight each other
    worker = EngineWorker(index, conn, ring_name, config)
    try:
        worker.serve()
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass
    finally:
        worker.ring.close()
