"""EngineActor: an engine worker as a Ray actor, for AVATAR_ENGINE=ray (server/ray_engine.py).

The same SessionHost as a local worker, called by Ray instead of a pipe. Each call
is one request. Frames are encoded here, on the node that rendered them, with the
server's own H.264 settings (engine/runtime/h264.py) at the rate the viewer's link
allows, and only the packets go back: ~6 kB a frame at 1.2 Mbit/s, against 393 kB raw.
This module imports no model code until an actor starts: the server imports it to
name the class.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import numpy as np

from engine.config import EngineConfig
from engine.runtime.h264 import FrameEncoder


class EngineActor:
    """Wrapped by `ray.remote` in server/ray_engine.py (this module does not need Ray)."""

    def __init__(self, index: int, config: EngineConfig):
        from engine.runtime.entry import single_threaded

        single_threaded()  # numpy is loaded already in a Ray worker; this reaches its children
        import cv2

        cv2.setNumThreads(1)
        from engine.runtime.host import SessionHost

        self.index, self.host = index, SessionHost(config)
        self.encoders: dict[str, FrameEncoder] = {}
        self.host.pipeline(self.host.preload)

    def ready(self) -> dict[str, Any]:
        """Who serves: shown by /healthz (kill this pid to test a worker's death)."""
        import ray

        return {"pid": os.getpid(), "host": socket.gethostname(), "node": ray.get_runtime_context().get_node_id()}

    def open(self, session_id: str, avatar: str, seed: int) -> None:
        self.host.open(session_id, avatar, seed)
        self.encoders[session_id] = FrameEncoder()

    def render(self, session_id: str, first_frame: int, pcm: bytes, frames: int, bitrate: int,
               keyframe: bool) -> list[bytes]:
        """One chunk's frames as H.264 access units at `bitrate`; the first one a keyframe
        when asked (the viewer lost a frame and cannot decode on without one)."""
        if session_id not in self.host.sessions:  # Ray restarted this actor since the session opened
            raise LookupError(f"session {session_id} is not on this engine worker: it restarted")
        try:
            rendered = self.host.render(session_id, first_frame, np.frombuffer(pcm, np.int16), frames).frames
            encoder = self.encoders[session_id]
            return [encoder.encode(frame, bitrate, keyframe and i == 0) for i, frame in enumerate(rendered)]
        except Exception:  # the session ends with this error (as on a local worker); the actor serves on
            self.close(session_id)
            raise

    def close(self, session_id: str) -> None:
        self.host.close(session_id)
        self.encoders.pop(session_id, None)
