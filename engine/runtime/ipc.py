"""Messages between the server's EngineClient and an EngineWorker, and the frame ring.

Control messages are small picklable dataclasses over a pipe. Frames never travel
in them: the worker writes each frame into a slot of a preallocated shared-memory
ring that the server owns and allocates, and only slot numbers cross the pipe.
This module imports no torch; the server uses it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from media.frame_size import FrameSize, frame_dims


@dataclass
class ReadyEvent:
    worker: int
    pid: int


@dataclass
class StartFailedEvent:
    """The worker could not load its default avatar (a broken model folder, say): why, in a line."""

    worker: int
    reason: str


@dataclass
class OpenSessionRequest:
    session_id: str
    avatar: str  # path to a prepared avatar: a portrait .png or a video .clip.npz
    seed: int


@dataclass
class SessionOpenedEvent:
    session_id: str


@dataclass
class RenderRequest:
    session_id: str
    chunk_id: int
    first_frame: int
    pcm: bytes  # 48 kHz mono int16, frames x 1920 samples
    slots: list[int]


@dataclass
class FramesReadyEvent:
    session_id: str
    chunk_id: int
    slots: list[int]


@dataclass
class CloseSessionRequest:
    session_id: str


@dataclass
class SessionErrorEvent:
    session_id: str
    code: str
    message: str


@dataclass
class ShutdownRequest:
    pass


class FrameRing:
    """Fixed slots of I420 frames in shared memory; create in the server, attach in the worker."""

    def __init__(self, size: FrameSize, slots: int, name: str | None = None):
        """`size`: a square frame's side, or (width, height)."""
        self.slots = slots
        width, height = frame_dims(size)
        self.frame_shape = (height * 3 // 2, width)
        nbytes = slots * self.frame_shape[0] * self.frame_shape[1]
        if name is None:
            self.shm = shared_memory.SharedMemory(create=True, size=nbytes)
        else:
            # Spawned workers share the server's resource tracker, which keeps a set of
            # names: attaching re-registers the same name, and only the server unlinks it.
            self.shm = shared_memory.SharedMemory(name=name)
        self.array = np.ndarray((slots, *self.frame_shape), np.uint8, buffer=self.shm.buf)

    @property
    def name(self) -> str:
        return self.shm.name

    def close(self, unlink: bool = False) -> None:
        del self.array
        self.shm.close()
        if unlink:
            self.shm.unlink()
