"""Engine configuration, passed from the server to each worker at spawn time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FPS = 25
SAMPLE_RATE = 48_000
SAMPLES_PER_FRAME = SAMPLE_RATE // FPS  # 1920: one video frame of audio
MOTION_MODELS = ("dit", "interim")


def motion_delay_frames(motion: str = "dit", weights: Path | None = None) -> int:
    """Frames by which a motion model's output lags the audio that drove it (its lookahead).

    The playout (server session, batch render, evaluation) delays the audio by as much, so
    a viewer sees each mouth shape with its sound. Read from the weights' metadata, which
    needs only safetensors, so the server can ask without loading the model.
    """
    if motion != "dit":
        return 0
    from safetensors import safe_open

    from engine.families.motion.dit import WEIGHTS

    with safe_open(str(weights or WEIGHTS), "numpy") as f:
        return int(json.loads(f.metadata()["config"]).get("lookahead", 0))


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
