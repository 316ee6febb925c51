"""EngineClient: the server's side of the engine process group.

Spawns the workers, waits for each one's ready handshake, places sessions on the
least-loaded worker, and turns worker replies into awaited futures. Nothing here
blocks the event loop: replies are read when the pipe is readable, requests are
written by one sender thread per worker through a bounded queue.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import queue
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from engine.config import EngineConfig
from engine.runtime.entry import run_worker
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
from server.bitrate import BitrateControl

log = logging.getLogger("server.engine")
SEND_QUEUE = 256
READY_TIMEOUT_S = 120


class EngineError(Exception):
    """A session's engine work failed; the session ends, the worker lives on."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class EngineUnavailable(EngineError):
    """A worker died or never started: fatal for its sessions."""


class WorkerHandle:
    """One spawned EngineWorker, its pipe, its frame ring and its free slots."""

    def __init__(self, index: int, config: EngineConfig, on_death: Callable[[WorkerHandle], None] = lambda w: None):
        ctx = mp.get_context("spawn")
        self.index, self.on_death, self.dead = index, on_death, False
        self.ring = FrameRing(config.frame, config.ring_slots)
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=run_worker, args=(index, child, self.ring.name, config),
                                   name=f"engine-worker-{index}", daemon=True)
        self.process.start()
        child.close()
        self.free = list(range(config.ring_slots))
        self.slot_freed = asyncio.Event()
        self.sessions: dict[str, WorkerSession] = {}
        self.ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._outbox: queue.Queue = queue.Queue(SEND_QUEUE)
        threading.Thread(target=self._send_loop, name=f"engine-send-{index}", daemon=True).start()
        asyncio.get_running_loop().add_reader(self.conn.fileno(), self._on_readable)

    def describe(self) -> dict[str, object]:
        return {"index": self.index, "pid": self.process.pid, "host": socket.gethostname(),
                "sessions": len(self.sessions), "free_frame_slots": len(self.free)}  # frames, not sessions

    def send(self, message: object) -> None:
        try:
            self._outbox.put_nowait(message)
        except queue.Full:
            raise EngineError("engine_busy", "the engine worker is not keeping up") from None

    def _send_loop(self) -> None:
        while True:
            message = self._outbox.get()
            try:
                self.conn.send(message)
            except (OSError, ValueError):
                return
            if isinstance(message, ShutdownRequest):
                return

    def _on_readable(self) -> None:
        try:
            while self.conn.poll():
                self._dispatch(self.conn.recv())
        except (EOFError, OSError):
            self._died()

    def _dispatch(self, message: object) -> None:
        if isinstance(message, ReadyEvent):
            if not self.ready.done():
                self.ready.set_result(message)
            return
        if isinstance(message, StartFailedEvent):
            if not self.ready.done():
                self.ready.set_exception(EngineUnavailable("worker_failed", f"engine worker failed to start: "
                                                           f"{message.reason}"))
            return
        session = self.sessions.get(getattr(message, "session_id", ""))
        if session is not None:
            session.deliver(message)
        elif isinstance(message, FramesReadyEvent):  # its session closed meanwhile
            for slot in message.slots:
                self.release(slot)

    def _died(self) -> None:
        if self.dead:
            return
        self.dead = True
        asyncio.get_running_loop().remove_reader(self.conn.fileno())
        if not self.ready.done():
            self.ready.set_exception(EngineUnavailable("worker_failed", "engine worker failed to start"))
        log.error("engine worker %d (pid %s) died with exit code %s", self.index, self.process.pid,
                  self.process.exitcode)
        for session in list(self.sessions.values()):
            session.fail(EngineUnavailable("worker_died", "the engine worker stopped; please reconnect"))
        self.sessions.clear()
        self.on_death(self)

    async def acquire(self, count: int) -> list[int]:
        while len(self.free) < count:
            self.slot_freed.clear()
            await self.slot_freed.wait()
        slots, self.free = self.free[:count], self.free[count:]
        return slots

    def release(self, slot: int) -> None:
        self.free.append(slot)
        self.slot_freed.set()

    def frame(self, slot: int) -> np.ndarray:
        if self.dead:  # its ring may be gone; its sessions are closing
            return np.zeros(self.ring.frame_shape, np.uint8)
        return self.ring.array[slot]

    async def stop(self) -> None:
        self.dead = True
        try:
            asyncio.get_running_loop().remove_reader(self.conn.fileno())
        except (ValueError, OSError):
            pass
        try:
            self.send(ShutdownRequest())
        except EngineError:
            pass
        await asyncio.to_thread(self.process.join, 5)
        if self.process.is_alive():
            self.process.kill()
        self.conn.close()
        self.ring.close(unlink=True)


FrameFormat = Literal["i420", "h264"]  # what an engine hands over: raw frames, or access units


@dataclass
class RenderedChunk:
    chunk_id: int
    slots: list[int]


class RenderSession(Protocol):
    """What a Session needs of its engine: WorkerSession here, RaySession with AVATAR_ENGINE=ray.

    `frame(slot)` is a raw I420 frame where `frame_format` is "i420", an H.264 access unit
    where it is "h264" (server/stream/video_path.py); an engine that compresses follows the
    viewer's link itself (`follow`) and is asked for a keyframe when a unit was not sent
    (`want_keyframe`)."""

    frame_format: FrameFormat
    failure: asyncio.Future[EngineError]  # resolved with what ended it, unless the server closed it first

    def follow(self, link: BitrateControl) -> None: ...

    def want_keyframe(self) -> None: ...

    async def wait_open(self) -> None: ...

    async def render(self, chunk_id: int, first_frame: int, pcm: np.ndarray, frames: int) -> RenderedChunk: ...

    def frame(self, slot: int) -> np.ndarray | bytes: ...

    def release(self, slot: int) -> None: ...

    def close(self) -> None: ...


class WorkerSession:
    """A session's handle on its worker: open, render chunks, release slots, close."""

    def __init__(self, worker: WorkerHandle, session_id: str):
        self.worker, self.session_id = worker, session_id
        self.failure: asyncio.Future[EngineError] = asyncio.get_running_loop().create_future()
        self._opened: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending: dict[int, asyncio.Future] = {}
        self.closed = False

    def deliver(self, message: object) -> None:
        if isinstance(message, SessionOpenedEvent):
            if not self._opened.done():
                self._opened.set_result(True)
        elif isinstance(message, FramesReadyEvent):
            future = self._pending.pop(message.chunk_id, None)
            if future is None or future.done():
                for slot in message.slots:  # nobody waits for them any more
                    self.worker.release(slot)
            else:
                future.set_result(RenderedChunk(message.chunk_id, message.slots))
        elif isinstance(message, SessionErrorEvent):
            self.fail(EngineError(message.code, message.message))

    def fail(self, error: EngineError) -> None:
        if not self._opened.done():
            self._opened.set_exception(error)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        if not self.closed and not self.failure.done():
            self.failure.set_result(error)

    async def wait_open(self) -> None:
        await self._opened

    async def render(self, chunk_id: int, first_frame: int, pcm: np.ndarray, frames: int) -> RenderedChunk:
        slots = await self.worker.acquire(frames)
        future = asyncio.get_running_loop().create_future()
        self._pending[chunk_id] = future
        try:
            self.worker.send(RenderRequest(self.session_id, chunk_id, first_frame, pcm.tobytes(), slots))
        except EngineError:
            self._pending.pop(chunk_id, None)
            for slot in slots:
                self.worker.release(slot)
            raise
        return await future

    frame_format: FrameFormat = "i420"  # raw from the ring; the server's encoder follows the link

    def follow(self, link: BitrateControl) -> None:
        pass

    def want_keyframe(self) -> None:
        pass

    def frame(self, slot: int) -> np.ndarray:
        return self.worker.frame(slot)

    def release(self, slot: int) -> None:
        self.worker.release(slot)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.worker.sessions.pop(self.session_id, None)
        for future in self._pending.values():
            future.cancel()
        self.worker.send(CloseSessionRequest(self.session_id))


class Engine(ABC):
    """What the server asks of its engine, whether local processes (EngineClient) or Ray
    actors (server/engines/ray.py RayEngineClient)."""

    workers: list[Any]  # each with describe(): what /healthz shows of it
    restarts: int

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    def open_session(self, session_id: str, avatar: str, seed: int) -> RenderSession: ...

    @property
    @abstractmethod
    def ready_workers(self) -> int:
        """Workers a new session may be placed on now."""

    def load(self) -> tuple[int, int] | None:
        """Sessions and capacity of an engine shared beyond this server (a Ray cluster), or None
        where the engine's only bound is this server's max_sessions."""
        return None

    @abstractmethod
    async def stop(self) -> None: ...


class EngineClient(Engine):
    """Starts and supervises the worker group; places sessions on the least-loaded worker.

    A worker that dies fails its own sessions (they get an error event and close) and is
    replaced at once; sessions on other workers never notice.
    """

    def __init__(self, config: EngineConfig, workers: int, on_restart: Callable[[], None] = lambda: None):
        self.config, self.count = config, workers
        self.workers: list[WorkerHandle] = []
        self.restarts = 0
        self.on_restart = on_restart  # told each time a dead worker is replaced
        self._stopping = False

    async def start(self) -> None:
        self.workers = [WorkerHandle(i, self.config, self._replace) for i in range(self.count)]
        try:
            await asyncio.wait_for(asyncio.gather(*(w.ready for w in self.workers)), READY_TIMEOUT_S)
        except BaseException:  # no worker is replaced, and every ring is unlinked, on the way out
            await self.stop()
            raise
        log.info("engine ready: %d worker(s)", len(self.workers))

    def _replace(self, dead: WorkerHandle) -> None:
        if self._stopping:
            return
        self.restarts += 1
        self.on_restart()
        self.workers[dead.index] = WorkerHandle(dead.index, self.config, self._replace)
        asyncio.ensure_future(dead.stop())  # reap the process, unlink its ring
        log.info("engine worker %d restarted", dead.index)

    def open_session(self, session_id: str, avatar: str, seed: int) -> WorkerSession:
        worker = min(self.workers, key=lambda w: (not w.ready.done(), len(w.sessions)))
        session = WorkerSession(worker, session_id)
        worker.sessions[session_id] = session
        worker.send(OpenSessionRequest(session_id, avatar, seed))
        return session

    @property
    def ready_workers(self) -> int:
        """Workers a new session may be placed on (a dead local one is replaced at once, and
        sessions placed on its successor wait for it)."""
        return len(self.workers)

    async def stop(self) -> None:
        self._stopping = True
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)
