"""How far the engine's pictures lag the audio that drove them (a motion model's lookahead, or a
latent chunk), known without loading any model: the server asks it for its delay line."""

from __future__ import annotations

import json
from pathlib import Path

from engine.config import EngineConfig


def picture_delay_frames(config: EngineConfig) -> int:
    """Frames by which the engine's pictures lag their sound: the motion model's lookahead, or
    for the latent family a chunk's frames and the lead its generation gets."""
    if config.family == "latent":
        from engine.families.latent.config import local_config

        return local_config(Path(config.model_dir))[1].delay_frames
    return motion_delay_frames(config.motion)


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
