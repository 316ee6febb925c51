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
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection

import numpy as np

from engine.config import EngineConfig
from engine.core.pipeline import Pipeline
from engine.core.stage import FrameChunk
from engine.facade import NoFaceError, failure_code
from engine.runtime.host import SessionHost
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
    StartFailedEvent,
)

log = logging.getLogger("engine.runtime.worker")
LOAD_POLL_S = 0.005


class EngineWorker:
    """Serves one pipe; see the module docstring."""

    def __init__(self, index: int, conn: Connection, ring_name: str, config: EngineConfig):
        self.index, self.conn, self.config = index, conn, config
        self.ring = FrameRing(config.frame, config.ring_slots, ring_name)
        self.host = SessionHost(config)
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="avatar-load")
        self._loading: dict[str, Future[Pipeline]] = {}  # avatar -> its load
        self._waiting: dict[str, list[OpenSessionRequest]] = {}  # avatar -> sessions opening on it

    def finish_loads(self) -> None:
        """Open the sessions whose avatar has finished loading (or fail them with its error)."""
        for avatar, future in list(self._loading.items()):
            if not future.done():
                continue
            del self._loading[avatar]
            waiting = self._waiting.pop(avatar, [])
            try:
                self.host.pipelines[avatar] = future.result()
            except Exception as exc:
                code = failure_code(exc)
                log.warning("avatar %s failed to load: %s", avatar, exc)
                for request in waiting:
                    self.conn.send(SessionErrorEvent(request.session_id, code, f"{type(exc).__name__}: {exc}"))
                continue
            for request in waiting:
                self.handle(request)  # opens it now: the pipeline is here
            self.host.forget_idle()

    def serve(self) -> None:
        try:
            self.host.pipeline(self.host.preload)
        except Exception as exc:
            self.conn.send(StartFailedEvent(self.index, f"{type(exc).__name__}: {exc}"))
            raise
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
                for waiting in self._waiting.values():
                    waiting[:] = [r for r in waiting if r.session_id != session]
                self.host.close(session)
        except NoFaceError as exc:
            self.conn.send(SessionErrorEvent(session, "bad_avatar", str(exc)))
        except Exception as exc:  # one broken session must not take the worker down
            log.exception("session %s failed", session)
            self.host.sessions.pop(session, None)
            if isinstance(message, RenderRequest):
                self.answer_unrendered(message)
            self.conn.send(SessionErrorEvent(session, "engine_error", f"{type(exc).__name__}: {exc}"))

    def open(self, request: OpenSessionRequest) -> None:
        if request.avatar not in self.host.pipelines:
            if request.avatar not in self._loading:
                self._loading[request.avatar] = self._loader.submit(self.host.load, request.avatar)
            self._waiting.setdefault(request.avatar, []).append(request)
            return
        self.host.open(request.session_id, request.avatar, request.seed)
        self.conn.send(SessionOpenedEvent(request.session_id))

    def render(self, request: RenderRequest) -> None:
        if request.session_id not in self.host.sessions:
            self.answer_unrendered(request)  # closed while the request was in flight
            return
        pcm = np.frombuffer(request.pcm, np.int16)
        self.publish(self.host.render(request.session_id, request.first_frame, pcm, len(request.slots)), request)

    def answer_unrendered(self, request: RenderRequest) -> None:
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
