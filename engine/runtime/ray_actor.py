"""EngineActor: an engine worker as a Ray actor, for AVATAR_ENGINE=ray (server/engines/ray.py).

The same SessionHost as a local worker, called by Ray instead of a pipe. Each call
is one request. Frames are encoded here, on the node that rendered them, with the
server's own H.264 settings (media/h264.py) at the rate the viewer's link
allows, and only the packets go back: ~6 kB a frame at 1.2 Mbit/s, against 393 kB raw.

The actors are a pool that several front ends share, so this actor, not a front end,
counts its sessions against its capacity, and holds each session on a lease: the
front end that opened it renews it with every render and every ping (each second).
A front end that dies stops renewing, and LEASE_S later its sessions are closed here,
so a lost front end never holds the cluster's capacity. Avatars arrive by content, not
by path (engine/runtime/avatar_cache.py): the front end's files need not be on this
node. This module imports no model code until an actor starts: the server imports it
to name the class.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import EngineConfig
from engine.runtime.avatar_cache import AvatarCache
from media.h264 import FrameEncoder

LEASE_S = 10.0


AvatarKey = tuple[str, str]  # (digest, suffix): an avatar as the front end names it


class EngineFull(Exception):
    """This actor already holds its capacity of sessions (another front end took the last place)."""


class EngineActor:
    """Wrapped by `ray.remote` in server/engines/ray.py (this module does not need Ray).

    Renders run in Ray's default concurrency group, pings and avatar files in groups of
    their own, so they touch shared state under locks: `_work` around the SessionHost (a
    ping only tries it, to expire leases, and never waits), `_leasing` around the leases."""

    def __init__(self, index: int, config: EngineConfig, capacity: int, avatars: AvatarCache | None = None):
        from engine.threads import single_threaded

        single_threaded()  # numpy is loaded already in a Ray worker; this reaches its children
        import cv2

        cv2.setNumThreads(1)
        from engine.runtime.host import SessionHost

        self.index, self.capacity, self.host = index, capacity, SessionHost(config)
        self.avatars = avatars or AvatarCache()
        self.encoders: dict[str, FrameEncoder] = {}
        self.leases: dict[str, float] = {}  # session -> when its lease ends (time.monotonic)
        self.front_ends: dict[str, float] = {}  # front end -> its latest ping
        self._work, self._leasing = threading.Lock(), threading.Lock()

    def warm(self, avatar: AvatarKey) -> None:
        """Analyse the front end's default avatar before any session asks for it, and keep it."""
        with self._work:
            self.host.preload = str(self.avatars.path(*avatar))
            self.host.pipeline(self.host.preload)

    def store_avatar(self, avatar: AvatarKey, data: bytes) -> None:
        """The front end's answer to AvatarMissing: the avatar's file, kept on this node."""
        in_use = {Path(p).name.split(".")[0] for p in list(self.host.pipelines)}
        self.avatars.store(*avatar, data, keep=in_use)

    def ready(self, front_end: str = "", sessions: Sequence[str] = ()) -> dict[str, Any]:
        """A front end's ping: who serves (/healthz shows it: kill this pid to test a worker's
        death), and `renew`'s answer."""
        import ray

        return {"pid": os.getpid(), "host": socket.gethostname(), "node": ray.get_runtime_context().get_node_id(),
                "gpus": [str(g) for g in ray.get_gpu_ids()], **self.renew(front_end, sessions, time.monotonic())}

    def renew(self, front_end: str, sessions: Sequence[str], now: float) -> dict[str, int]:
        """Renews the leases of `sessions` (the pinging front end's own here), expires the
        lapsed ones, and tells how full this actor is and how much of it is that front end's."""
        with self._leasing:
            if front_end:
                self.front_ends[front_end] = now
            callers = [s for s in sessions if s in self.leases]
            self.leases.update((s, now + LEASE_S) for s in callers)
        if self._work.acquire(blocking=False):  # busy rendering: the next ping expires them
            try:
                self._expire(now)
            finally:
                self._work.release()
        return {"capacity": self.capacity, "sessions": len(self.leases), "callers": len(callers),
                "front_ends": self._front_ends(now)}

    def leave(self, front_end: str, now: float | None = None) -> int:
        """A front end stops: the other front ends using this actor (0: it may be removed)."""
        with self._leasing:
            self.front_ends.pop(front_end, None)
            return self._front_ends(time.monotonic() if now is None else now)

    def _front_ends(self, now: float) -> int:
        return sum(now - seen < LEASE_S for seen in self.front_ends.values())

    def _expire(self, now: float) -> None:
        with self._leasing:
            lapsed = [s for s, until in self.leases.items() if until < now]
        for session_id in lapsed:
            self._close(session_id)

    def open(self, session_id: str, avatar: AvatarKey, seed: int) -> None:
        with self._work:
            if len(self.leases) >= self.capacity:
                raise EngineFull(f"this engine worker holds its {self.capacity} sessions")
            self.host.open(session_id, str(self.avatars.path(*avatar)), seed)
            self.encoders[session_id] = FrameEncoder()
            with self._leasing:
                self.leases[session_id] = time.monotonic() + LEASE_S

    def render(self, session_id: str, first_frame: int, pcm: bytes, frames: int, bitrate: int,
               keyframe: bool) -> list[bytes]:
        """One chunk's frames as H.264 access units at `bitrate`; the first one a keyframe
        when asked (the viewer lost a frame and cannot decode on without one)."""
        with self._work:
            if session_id not in self.host.sessions:  # Ray restarted this actor, or the lease lapsed
                raise LookupError(f"session {session_id} is not on this engine worker: it restarted")
            with self._leasing:
                self.leases[session_id] = time.monotonic() + LEASE_S
            try:
                rendered = self.host.render(session_id, first_frame, np.frombuffer(pcm, np.int16), frames).frames
                encoder = self.encoders[session_id]
                return [encoder.encode(frame, bitrate, keyframe and i == 0) for i, frame in enumerate(rendered)]
            except Exception:  # the session ends with this error (as on a local worker); the actor serves on
                self._close(session_id)
                raise

    def close(self, session_id: str) -> None:
        with self._work:
            self._close(session_id)

    def _close(self, session_id: str) -> None:
        self.host.close(session_id)
        self.encoders.pop(session_id, None)
        with self._leasing:
            self.leases.pop(session_id, None)
