"""Engine configuration, passed from the server to each worker at spawn time."""

from __future__ import annotations

import glob
from dataclasses import dataclass

from media.clock import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME

__all__ = ["FPS", "SAMPLE_RATE", "SAMPLES_PER_FRAME", "MOTION_MODELS", "FAMILIES", "EngineConfig", "nvidia_gpus"]
MOTION_MODELS = ("dit", "interim")
FAMILIES = ("cpu", "latent")


def nvidia_gpus() -> int:
    """NVIDIA devices on this machine, counted without importing torch (the server never does)."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


@dataclass(frozen=True)
class EngineConfig:
    """How the engine renders; one instance shared by all workers."""

    size: int = 512
    """Frames are drawn size x size pixels (the head)."""
    width: int = 0
    height: int = 0
    """Streamed frames, when wider or taller than the drawn head (the latent family pastes the
    head into the photo's surroundings: engine/families/portrait/scene.py); 0: size."""
    chunk_frames: int = 2
    """Frames rendered per request; the audio latency the chunk loop adds is this x 40 ms."""
    ring_slots: int = 48
    """Frame slots in each worker's shared-memory ring (each holds one I420 frame)."""
    motion: str = "dit"
    """Audio-to-motion model: "dit" (the trained MotionDiT) or "interim" (the hand-set mapping)."""
    family: str = "cpu"
    """"cpu": the portrait and video families (a rig or the person's clip, drawn on a CPU);
    "latent": SoulX-FlashHead's DiT and VAE generate the face (a GPU; photo avatars only)."""
    model_dir: str = ""
    """The latent family's downloaded checkpoints (engine/families/latent/config.py: MODEL_LAYOUT)."""
    offload: bool = False
    """Latent family: keep the DiT's blocks in host memory and stream them to the GPU block by block."""
    dit_gpus: int = 1
    """Latent family: GPUs each worker's DiT runs across, sequence parallel (families/latent/parallel.py)."""
    preload_avatar: str = ""
    """Prepared portrait each worker analyses before it reports ready (the server's default)."""

    @property
    def frame(self) -> tuple[int, int]:
        """Streamed frames' (width, height)."""
        return self.width or self.size, self.height or self.size
