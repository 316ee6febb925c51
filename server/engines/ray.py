"""RayEngineClient: the engine's workers as Ray actors on a cluster (AVATAR_ENGINE=ray).

The same interface as the local EngineClient: `start`, `open_session`, `workers`,
`restarts`, `stop`, plus `load` (the cluster's sessions and capacity, for admission).
Ray calls are awaited, never waited on: an ObjectRef is awaitable, and the blocking
calls (`ray.init`, creating and finding actors) run on a thread.

The actors are a pool shared by every front end with the same engine settings: named
`engine-<hash of the settings>-<i>` and detached, so a front end creates the ones that
are missing and uses the ones that others made (found again every few seconds). Each
actor counts its own sessions, from all front ends, against its capacity, and its
pings tell how full it is: a session goes to the ready actor with the most free places
anywhere in the cluster, and on to the next if another front end took the last place
since the last ping. A front end that stops removes the actors no other front end
has pinged lately; one that dies leaves its sessions to lapse on their leases
(engine/runtime/ray_actor.py).

Faults: Ray restarts an actor whose process or node dies (`max_restarts=-1`); each is
pinged each second. A call that fails on a dead actor, a ping that fails, or a ping
answered by another process (a restarted actor remembers no sessions) fails that
actor's sessions with `worker_died`; new sessions avoid it until a ping succeeds again.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from engine.config import EngineConfig
from engine.facade import failure_code
from engine.runtime.ray_actor import EngineActor, EngineFull
from server.bitrate import BitrateControl
from server.engines.client import READY_TIMEOUT_S, Engine, EngineError, EngineUnavailable, FrameFormat, RenderedChunk
from server.engines.ray_avatars import AvatarShipping

log = logging.getLogger("server.engine")
PING_S = 1.0
PING_TIMEOUT_S = 2.0
DISCOVER_EVERY = 5  # pings between two looks for actors other front ends added
NAMESPACE = "avatar-server"


@dataclass(frozen=True)
class Pool:
    """The engine actors this front end wants: `workers` of them, each reserving `cpus` and
    `gpus` and taking `sessions` at most."""

    workers: int
    cpus: float = 1.0
    gpus: float = 0.0
    sessions: int = 2

    def prefix(self, config: EngineConfig) -> str:
        """Front ends whose actors would differ never share them; the actors' count may differ."""
        shape = repr((config, self.cpus, self.gpus, self.sessions)).encode()
        return f"engine-{hashlib.sha1(shape).hexdigest()[:8]}"


def _died() -> EngineUnavailable:
    return EngineUnavailable("worker_died", "the engine worker stopped; please reconnect")


class RayWorker:
    """One EngineActor as this front end sees it."""

    def __init__(self, index: int, name: str, actor: Any):
        self.index, self.name, self.actor = index, name, actor
        self.info: dict[str, Any] = {}  # the answer of its latest ping: pid, host, node
        self.ready = False
        self.sessions: dict[str, RaySession] = {}
        self.bytes_received = 0  # compressed frames from its node: what crosses the network per session

    @property
    def capacity(self) -> int:
        return int(self.info.get("capacity", 0))

    @property
    def load(self) -> int:
        """Sessions on the actor: other front ends' as of its latest ping, and ours now."""
        return int(self.info.get("sessions", 0)) - int(self.info.get("callers", 0)) + len(self.sessions)

    def describe(self) -> dict[str, Any]:
        pinged = {k: v for k, v in self.info.items() if k != "callers"}  # "sessions" below counts ours now
        return {**pinged, "index": self.index, "name": self.name, "ready": self.ready, "sessions": self.load,
                "ours": len(self.sessions), "bytes_received": self.bytes_received}

    def lost(self, why: str) -> None:
        """Its actor died or was replaced: its sessions end; new ones wait for a good ping."""
        if self.ready or self.sessions:
            log.error("engine actor %s lost (%s): %d session(s) end", self.name, why, len(self.sessions))
        self.ready = False
        for session in list(self.sessions.values()):
            session.fail(_died())
        self.sessions.clear()


def _session_error(cause: BaseException) -> EngineError:
    if isinstance(cause, EngineFull):  # another front end took the actor's last place meanwhile
        return EngineUnavailable("at_capacity", "the engine cluster is full; try again shortly")
    return EngineError(failure_code(cause), f"{type(cause).__name__}: {cause}")


def _most_free(worker: RayWorker) -> tuple[int, int]:
    return worker.capacity - worker.load, -worker.index


class _Full(Exception):
    """An actor refused a session for want of a place (RaySession._open tries another)."""


Place = Callable[[set[int]], RayWorker | None]  # the actor to try next, given those found full


class RaySession:
    """A session's handle on its actor: the RenderSession interface. Frames arrive as H.264
    (engine/runtime/ray_actor.py) and are kept here under slot numbers of this session's
    own (at most the pump's lead is ever held)."""

    frame_format: FrameFormat = "h264"

    def __init__(self, worker: RayWorker, session_id: str, avatar: str, seed: int, ceiling: int,
                 shipping: AvatarShipping, place: Place):
        self.worker, self.session_id = worker, session_id
        self.failure: asyncio.Future[EngineError] = asyncio.get_running_loop().create_future()
        self.closed = False
        self.link = BitrateControl(ceiling)  # the viewer's, once its track exists (follow)
        self._keyframe = False
        self._frames: dict[int, bytes] = {}
        self._slots = itertools.count()
        self._opened = asyncio.ensure_future(self._open(avatar, seed, shipping, place))

    async def _open(self, avatar: str, seed: int, shipping: AvatarShipping, place: Place) -> None:
        """Open on the chosen actor; one that another front end filled meanwhile (EngineFull)
        passes the session on to the next with a free place, as far as this front end knows."""
        full: set[int] = set()
        while True:
            open_ = shipping.call(self.worker.actor, avatar, lambda key: self.worker.actor.open.remote(
                self.session_id, key, seed))
            try:
                return await self._call(open_, retry_full=True)
            except _Full:
                if self.closed:
                    return
                full.add(self.worker.index)
                other = place(full)
                if other is None:
                    self._call_failed(_session_error(EngineFull()))
                self.worker.sessions.pop(self.session_id, None)
                self.worker = other
                other.sessions[self.session_id] = self

    async def _call(self, call: Awaitable[Any], retry_full: bool = False) -> Any:
        import ray

        try:
            return await call
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            self.worker.lost("a call failed")
            raise _died() from None
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, LookupError):  # restarted between two pings: every session of it is gone
                self.worker.lost("restarted")
                raise _died() from None
            if retry_full and isinstance(exc.cause, EngineFull):
                raise _Full from None
            failure = _session_error(exc.cause)  # the session's own; the actor lives on
        except EngineError as exc:  # its avatar file could not be read here
            failure = exc
        self._call_failed(failure)

    def _call_failed(self, failure: EngineError) -> NoReturn:
        self.fail(failure)
        raise failure from None

    def fail(self, error: EngineError) -> None:
        if not self.closed:
            self.closed = True
            self.worker.sessions.pop(self.session_id, None)
            self.failure.set_result(error)

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


class RayEngineClient(Engine):
    """The engine as a pool of Ray actors shared by front ends: places sessions, pings the
    actors, and fails the sessions of one that is lost."""

    def __init__(self, config: EngineConfig, pool: Pool, address: str, bitrate: int,
                 on_restart: Callable[[], None] = lambda: None):
        self.config, self.pool, self.address, self.on_restart = config, pool, address, on_restart
        self.bitrate = bitrate  # the highest, as the local engine's encoders start at
        self.workers: list[RayWorker] = []
        self.shipping = AvatarShipping()
        self.restarts = 0
        self._watch: asyncio.Task | None = None
        self.prefix = pool.prefix(config)
        self.front_end = f"{socket.gethostname()}-{os.getpid()}"  # how the actors tell front ends apart

    async def start(self) -> None:
        # Ray's own handler would catch the server's SIGTERM, print a stack and exit at once,
        # skipping the graceful shutdown that closes sessions and the TTS process
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        import ray

        await asyncio.to_thread(ray.init, address=self.address, namespace=NAMESPACE, log_to_driver=False,
                                configure_logging=False)
        self._add(await asyncio.to_thread(self._create))
        self._add(await asyncio.to_thread(self._discover))
        try:
            await asyncio.wait_for(asyncio.gather(*(self._ping(w) for w in self.workers)), READY_TIMEOUT_S)
            await asyncio.wait_for(asyncio.gather(*(self._warm(w) for w in self.workers)), READY_TIMEOUT_S)
        except TimeoutError:
            free = ray.available_resources()  # type: ignore[no-untyped-call]
            raise RuntimeError(
                f"{self.pool.workers} engine actor(s) of {self.pool.cpus:g} CPU and {self.pool.gpus:g} GPU each did "
                f"not start within {READY_TIMEOUT_S} s on the Ray cluster at {self.address} "
                f"({free.get('CPU', 0):g} CPU, {free.get('GPU', 0):g} GPU free): add nodes or lower AVATAR_WORKERS"
            ) from None
        log.info("engine ready: %d Ray actor(s) named %s-* on %s", len(self.workers), self.prefix, self.address)
        self._watch = asyncio.create_task(self._watch_loop())

    def _create(self) -> list[tuple[str, Any]]:
        """This front end's share of the pool: made where missing, found where another front end made it."""
        import ray

        # pings run in a group of their own: an avatar loading or a queue of renders never
        # makes a live actor look dead
        remote = ray.remote(concurrency_groups={"ping": 1, "ship": 1})(EngineActor)  # type: ignore[call-overload]
        made = []
        for i in range(self.pool.workers):
            name = f"{self.prefix}-{i}"
            # detached: the pool outlives the front end that made it. SPREAD: one node's loss
            # takes as few sessions with it as the cluster allows
            made.append((name, remote.options(
                name=name, get_if_exists=True, lifetime="detached", num_cpus=self.pool.cpus,
                num_gpus=self.pool.gpus, max_restarts=-1, max_task_retries=0, scheduling_strategy="SPREAD",
            ).remote(i, self.config, self.pool.sessions)))
        return made

    def _discover(self) -> list[tuple[str, Any]]:
        """The pool's actors that other front ends made and this one does not know yet."""
        import ray

        known = {w.name for w in self.workers}
        names = [n for n in ray.util.list_named_actors() if n.startswith(self.prefix + "-") and n not in known]
        found = []
        for name in names:
            try:
                found.append((name, ray.get_actor(name)))
            except ValueError:  # removed since it was listed
                pass
        return found

    def _add(self, actors: list[tuple[str, Any]]) -> None:
        known = {w.name for w in self.workers}
        for name, actor in actors:
            if name not in known:
                self.workers.append(RayWorker(int(name.rsplit("-", 1)[1]), name, actor))
        self.workers.sort(key=lambda w: w.index)

    async def _warm(self, worker: RayWorker) -> None:
        """The default avatar, analysed on the actor before a session needs it."""
        await self.shipping.call(worker.actor, self.config.preload_avatar, lambda key: worker.actor.warm.remote(key))

    def _rewarm(self, worker: RayWorker) -> None:
        def done(task: asyncio.Task) -> None:
            if not task.cancelled() and task.exception():
                log.warning("engine actor %s could not analyse the default avatar: %s", worker.name, task.exception())

        asyncio.ensure_future(self._warm(worker)).add_done_callback(done)

    async def _ping(self, worker: RayWorker, timeout: float | None = None) -> None:
        ping = worker.actor.ready.options(concurrency_group="ping")
        info = await asyncio.wait_for(ping.remote(self.front_end, list(worker.sessions)), timeout)
        if worker.info and info["pid"] != worker.info["pid"]:
            worker.lost(f"restarted as pid {info['pid']}")
            self.restarts += 1
            self.on_restart()
            self._rewarm(worker)
        worker.info, worker.ready = info, True

    async def _watch_loop(self) -> None:
        for beat in itertools.count(1):
            await asyncio.sleep(PING_S)
            if beat % DISCOVER_EVERY == 0:
                try:
                    self._add(await asyncio.to_thread(self._discover))
                except Exception as exc:  # the head is unreachable: pings say what that means for sessions
                    log.warning("could not list the Ray cluster's engine actors: %s", exc)
            for worker, result in zip(self.workers, await asyncio.gather(
                    *(self._ping(w, PING_TIMEOUT_S) for w in self.workers), return_exceptions=True)):
                if isinstance(result, Exception):
                    worker.lost(type(result).__name__)

    def open_session(self, session_id: str, avatar: str, seed: int) -> RaySession:
        # the most free places anywhere in the cluster; none ready or none free: its open fails
        worker = self._place(set()) or max([w for w in self.workers if w.ready] or self.workers, key=_most_free)
        session = RaySession(worker, session_id, avatar, seed, self.bitrate, self.shipping, self._place)
        worker.sessions[session_id] = session
        return session

    def _place(self, full: set[int]) -> RayWorker | None:
        """The ready actor, not among `full`, with the most free places; None if none has one."""
        free = [w for w in self.workers if w.ready and w.index not in full and w.load < w.capacity]
        return max(free, key=_most_free, default=None)

    @property
    def ready_workers(self) -> int:
        return sum(w.ready for w in self.workers)

    def load(self) -> tuple[int, int]:
        """Sessions on the cluster's ready actors, from every front end, and their capacity."""
        ready = [w for w in self.workers if w.ready]
        return sum(w.load for w in ready), sum(w.capacity for w in ready)

    async def stop(self) -> None:
        import ray

        if self._watch:
            self._watch.cancel()
        for worker in self.workers:
            for session in list(worker.sessions.values()):
                session.close()
        # the actors no other front end uses go with this one; a failed answer keeps the actor
        leave = [asyncio.wait_for(w.actor.leave.options(concurrency_group="ping").remote(self.front_end), PING_S)
                 for w in self.workers]
        for worker, others in zip(self.workers, await asyncio.gather(*leave, return_exceptions=True)):
            if others == 0:
                ray.kill(worker.actor, no_restart=True)
        await asyncio.to_thread(ray.shutdown)
