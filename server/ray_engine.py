"""RayEngineClient: the engine's workers as Ray actors on a cluster (AVATAR_ENGINE=ray).

The same interface as the local EngineClient: `start`, `open_session` (the session on
the actor with the fewest sessions among those ready), `workers`, `restarts`, `stop`.
Ray calls are awaited, never waited on: an ObjectRef is awaitable, and the one blocking
call (`ray.init`) runs on a thread.

Faults: every actor is named, restarted by Ray when its process or node dies
(`max_restarts=-1`), and pinged each second. A call that fails on a dead actor, a ping
that fails, or a ping answered by another process (a restarted actor remembers no
sessions) fails that actor's sessions with `worker_died`; new sessions avoid it until
a ping succeeds again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.config import EngineConfig
from engine.families.portrait.avatar import NoFaceError
from engine.runtime.ray_actor import EngineActor

from .engine_client import READY_TIMEOUT_S, EngineError, EngineUnavailable, RenderedChunk
from .link import BitrateControl

log = logging.getLogger("server.engine")
PING_S = 1.0
PING_TIMEOUT_S = 2.0
NAMESPACE = "avatar-server"


def _died() -> EngineUnavailable:
    return EngineUnavailable("worker_died", "the engine worker stopped; please reconnect")


class RayWorker:
    """One EngineActor as this front end sees it."""

    def __init__(self, index: int, name: str, actor: Any):
        self.index, self.name, self.actor = index, name, actor
        self.info: dict[str, Any] = {}  # the answer of its latest ping: pid, host, node
        self.ready = False
        self.sessions: dict[str, RaySession] = {}
        self.bytes_received = 0  # encoded frames from its node: what crosses the network per session

    def describe(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "ready": self.ready, "sessions": len(self.sessions),
                "bytes_received": self.bytes_received, **self.info}

    def lost(self, why: str) -> None:
        """Its actor died or was replaced: its sessions end; new ones wait for a good ping."""
        if self.ready or self.sessions:
            log.error("engine actor %s lost (%s): %d session(s) end", self.name, why, len(self.sessions))
        self.ready = False
        for session in list(self.sessions.values()):
            session.fail(_died())
        self.sessions.clear()


class RaySession:
    """A session's handle on its actor: the EngineSession interface. Frames arrive encoded
    (engine/runtime/ray_actor.py) and are kept here under slot numbers of this session's
    own (at most the pump's lead is ever held)."""

    encoded = True

    def __init__(self, worker: RayWorker, session_id: str, avatar: str, seed: int, ceiling: int,
                 on_error: Callable[[EngineError], None]):
        self.worker, self.session_id, self.on_error = worker, session_id, on_error
        self.closed = False
        self.link = BitrateControl(ceiling)  # the viewer's, once its track exists (follow)
        self._keyframe = False
        self._frames: dict[int, bytes] = {}
        self._slots = itertools.count()
        self._opened = asyncio.ensure_future(self._call(worker.actor.open.remote(session_id, avatar, seed)))

    async def _call(self, ref: Any) -> Any:
        import ray

        try:
            return await ref
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            self.worker.lost("a call failed")
            raise _died() from None
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, LookupError):  # restarted between two pings: every session of it is gone
                self.worker.lost("restarted")
                raise _died() from None
            # the session's own failure; the actor lives on
            code = "bad_avatar" if isinstance(cause, NoFaceError) else "engine_error"
            error = EngineError(code, f"{type(cause).__name__}: {cause}")
            self.fail(error)
            raise error from None

    def fail(self, error: EngineError) -> None:
        if not self.closed:
            self.closed = True
            self.worker.sessions.pop(self.session_id, None)
            self.on_error(error)

    async def wait_open(self) -> None:
        await self._opened

    def follow(self, link: BitrateControl) -> None:
        self.link = link

    def want_keyframe(self) -> None:
        self._keyframe = True

    async def render(self, chunk_id: int, first_frame: int, pcm: np.ndarray, frames: int) -> RenderedChunk:
        if self.closed:
            raise _died()
        keyframe, self._keyframe = self._keyframe, False
        rendered = await self._call(self.worker.actor.render.remote(
            self.session_id, first_frame, pcm.tobytes(), frames, self.link.rate, keyframe))
        self.worker.bytes_received += sum(len(unit) for unit in rendered)
        slots = [next(self._slots) for _ in range(len(rendered))]
        self._frames.update(zip(slots, rendered))
        return RenderedChunk(chunk_id, slots)

    def frame(self, slot: int) -> bytes:
        return self._frames.get(slot, b"")  # closed meanwhile: an empty unit, and nothing is sent

    def release(self, slot: int) -> None:
        self._frames.pop(slot, None)

    def close(self) -> None:
        was_open, self.closed = not self.closed, True
        self._frames.clear()
        if self.worker.sessions.pop(self.session_id, None) is not None and was_open:
            self.worker.actor.close.remote(self.session_id)  # fire and forget: a dead actor has forgotten it


class RayEngineClient:
    """See the module docstring."""

    def __init__(self, config: EngineConfig, workers: int, address: str, bitrate: int,
                 on_restart: Callable[[], None] = lambda: None):
        self.config, self.count, self.address, self.on_restart = config, workers, address, on_restart
        self.bitrate = bitrate  # the highest, as the local engine's encoders start at
        self.workers: list[RayWorker] = []
        self.restarts = 0
        self._watch: asyncio.Task | None = None
        # actors are named per front end: several front ends may share one cluster
        self._prefix = f"engine-{socket.gethostname()}-{os.getpid()}"

    async def start(self) -> None:
        # Ray's own handler would catch the server's SIGTERM, print a stack and exit at once,
        # skipping the graceful shutdown that closes sessions and the TTS process
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        import ray

        await asyncio.to_thread(ray.init, address=self.address, namespace=NAMESPACE, log_to_driver=False,
                                configure_logging=False)
        # pings run in a group of their own: an avatar loading or a queue of renders never
        # makes a live actor look dead
        remote = ray.remote(concurrency_groups={"ping": 1})(EngineActor)  # type: ignore[call-overload]
        for i in range(self.count):
            name = f"{self._prefix}-{i}"
            # SPREAD: one node's loss takes as few sessions with it as the cluster allows
            actor = remote.options(name=name, num_cpus=1, max_restarts=-1, max_task_retries=0,
                                   scheduling_strategy="SPREAD").remote(i, self.config)
            self.workers.append(RayWorker(i, name, actor))
        try:
            await asyncio.wait_for(asyncio.gather(*(self._ping(w) for w in self.workers)), READY_TIMEOUT_S)
        except TimeoutError:
            free = ray.available_resources().get("CPU", 0)  # type: ignore[no-untyped-call]
            raise RuntimeError(f"{self.count} engine actor(s) of one CPU each did not start within "
                               f"{READY_TIMEOUT_S} s on the Ray cluster at {self.address} ({free:g} CPU free): "
                               "add nodes or lower AVATAR_WORKERS") from None
        log.info("engine ready: %d Ray actor(s) on %s", len(self.workers), self.address)
        self._watch = asyncio.create_task(self._watch_loop())

    async def _ping(self, worker: RayWorker, timeout: float | None = None) -> None:
        info = await asyncio.wait_for(worker.actor.ready.options(concurrency_group="ping").remote(), timeout)
        if worker.info and info["pid"] != worker.info["pid"]:
            worker.lost(f"restarted as pid {info['pid']}")
            self.restarts += 1
            self.on_restart()
        worker.info, worker.ready = info, True

    async def _watch_loop(self) -> None:
        while True:
            await asyncio.sleep(PING_S)
            for worker, result in zip(self.workers, await asyncio.gather(
                    *(self._ping(w, PING_TIMEOUT_S) for w in self.workers), return_exceptions=True)):
                if isinstance(result, Exception):
                    worker.lost(type(result).__name__)

    def open_session(self, session_id: str, avatar: str, seed: int,
                     on_error: Callable[[EngineError], None]) -> RaySession:
        ready = [w for w in self.workers if w.ready] or self.workers  # none ready: its open fails
        worker = min(ready, key=lambda w: len(w.sessions))
        session = RaySession(worker, session_id, avatar, seed, self.bitrate, on_error)
        worker.sessions[session_id] = session
        return session

    @property
    def ready_workers(self) -> int:
        return sum(w.ready for w in self.workers)

    async def stop(self) -> None:
        import ray

        if self._watch:
            self._watch.cancel()
        for worker in self.workers:
            ray.kill(worker.actor, no_restart=True)
        await asyncio.to_thread(ray.shutdown)
