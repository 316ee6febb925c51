"""Identity-aware mouth: the motion model's mouth scaled to this person's own range.

The model was trained over many mouths; this one may open wider or narrower. During
preparation the model hears the clip's own sound (the caller drives it: families do not
run pipelines), and each mouth key is scaled by how much more (or less) the person's
fitted key varies over the clip than the model's. A
gain and nothing else: shut lips stay shut and a neutral mouth stays neutral (a
quantile map was tried first, and sent the model's near-zero silence to the person's
median, a half-open mouth). A clip without usable sound keeps a gain of 1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.config import SAMPLES_PER_FRAME
from engine.families.video.mouth import KEY_INDEX

Drive = Callable[[np.ndarray], np.ndarray]
"""48 kHz int16 sound -> (frames, DIM) the motion model's track of it (engine.assembly.model_motion)."""

GAIN_RANGE = (0.5, 2.5)
MIN_SPEECH_DB = -45.0  # a clip whose loudest frame is quieter than this has no speech to learn from


def mouth_gain(pcm: np.ndarray | None, fitted: np.ndarray, drive: Drive) -> np.ndarray:
    """(K,) gain per mouth key (mouth.KEYS): the person's std over the model's, on the clip."""
    if pcm is None or len(pcm) < SAMPLES_PER_FRAME * 50 or _peak_db(pcm) < MIN_SPEECH_DB:
        return np.ones(len(KEY_INDEX), np.float32)
    model = drive(pcm)
    n = min(len(model), len(fitted))
    ours, theirs = model[:n][:, KEY_INDEX].std(0), fitted[:n][:, KEY_INDEX].std(0)
    gain = np.where(ours > 1e-3, theirs / np.maximum(ours, 1e-3), 1.0)
    return np.clip(gain, *GAIN_RANGE).astype(np.float32)


def apply(gain: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """A motion frame with its mouth keys scaled (other values kept)."""
    out = coeffs.copy()
    out[KEY_INDEX] *= gain
    return out


def _peak_db(pcm: np.ndarray) -> float:
    x = pcm.astype(np.float32) / 32768
    frames = len(x) // SAMPLES_PER_FRAME
    rms = np.sqrt((x[: frames * SAMPLES_PER_FRAME].reshape(frames, -1) ** 2).mean(1) + 1e-12)
    return float(20 * np.log10(rms.max()))
