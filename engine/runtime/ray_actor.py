"""EngineActor: an engine worker as a Ray actor, for AVATAR_ENGINE=ray (server/ray_engine.py).

The same SessionHost as a local worker, called by Ray instead of a pipe. Each call
is one request; frames come back as the call's result (through Ray's object store,
so on one node nothing is copied twice). This module imports no model code until an
actor starts: the server imports it to name the class.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import numpy as np

from engine.config import EngineConfig


class EngineActor:
    """Wrapped by `ray.remote` in server/ray_engine.py (this module does not need Ray)."""

    def __init__(self, index: int, config: EngineConfig):
        from engine.runtime.entry import single_threaded

        single_threaded()  # numpy is loaded already in a Ray worker; this reaches its children
        import cv2

        cv2.setNumThreads(1)
        from engine.runtime.host import SessionHost

        self.index, self.host = index, SessionHost(config)
        self.host.pipeline(self.host.preload)

    def ready(self) -> dict[str, Any]:
        """Who serves: shown by /healthz (kill this pid to test a worker's death)."""
        import ray

        return {"pid": os.getpid(), "host": socket.gethostname(), "node": ray.get_runtime_context().get_node_id()}

    def open(self, session_id: str, avatar: str, seed: int) -> None:
        self.host.open(session_id, avatar, seed)

    def render(self, session_id: str, first_frame: int, pcm: bytes, frames: int) -> np.ndarray:
        """(frames, size * 3 // 2, size) I420 frames for one chunk."""
        return self.host.render(session_id, first_frame, np.frombuffer(pcm, np.int16), frames).frames

    def close(self, session_id: str) -> None:
        self.host.close(session_id)

    def sessions(self) -> int:
        return len(self.host.sessions)
