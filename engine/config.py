"""Engine configuration, passed from the server to each worker at spawn time."""

from __future__ import annotations

from dataclasses import dataclass

from media.clock import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME

__all__ = ["FPS", "SAMPLE_RATE", "SAMPLES_PER_FRAME", "MOTION_MODELS", "EngineConfig"]
MOTION_MODELS = ("dit", "interim")


@dataclass(frozen=True)
class EngineConfig:
    """How the engine renders; one instance shared by all workers."""

    size: int = 512
    """Output frames are size x size pixels."""
    chunk_frames: int = 2
    """Frames rendered per request; the audio latency the chunk loop adds is this x 40 ms."""
    ring_slots: int = 48
    """Frame slots in each worker's shared-memory ring (each holds one I420 frame)."""
    motion: str = "dit"
    """Audio-to-motion model: "dit" (the trained MotionDiT) or "interim" (the hand-set mapping)."""
    preload_avatar: str = ""
    """Prepared portrait each worker analyses before it reports ready (the server's default)."""
