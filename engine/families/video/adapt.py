"""Identity-aware mouth: the motion model's mouth mapped onto this person's own range.

The model was trained over many mouths; this one may open wider or narrower. During
preparation the model hears the clip's own sound, and each mouth key's distribution
over the clip is matched to the person's fitted one (quantile to quantile, a monotone
map, so timing and ordering are the model's and only the range is the person's). A
clip without usable sound keeps the identity map.
"""

from __future__ import annotations

import numpy as np

from engine.config import SAMPLES_PER_FRAME, motion_delay_frames
from engine.families.video.mouth import KEY_INDEX

QUANTILES = np.linspace(0, 1, 21)
MIN_SPEECH_DB = -45.0  # a clip whose loudest second is quieter than this has no speech to learn from


def identity_map() -> np.ndarray:
    q = np.tile(QUANTILES, (len(KEY_INDEX), 1)).astype(np.float32)
    return np.stack([q, q])


def mouth_map(pcm: np.ndarray | None, fitted: np.ndarray) -> np.ndarray:
    """(2, K, Q): the model's quantiles on the clip's sound, then the fitted ones."""
    if pcm is None or len(pcm) < SAMPLES_PER_FRAME * 50 or _peak_db(pcm) < MIN_SPEECH_DB:
        return identity_map()
    from engine.batch.runner import motion_track
    from engine.core.pipeline import Pipeline, motion_stages

    model = motion_track(Pipeline(motion_stages("dit")), pcm, motion_delay_frames("dit"))
    n = min(len(model), len(fitted))
    ours = np.quantile(model[:n][:, KEY_INDEX], QUANTILES, axis=0).T
    theirs = np.quantile(fitted[:n][:, KEY_INDEX], QUANTILES, axis=0).T
    # np.interp needs rising x: a key the model never moves keeps the identity map
    flat = np.ptp(ours, axis=1) < 1e-3
    ours[flat], theirs[flat] = identity_map()[0][flat], identity_map()[0][flat]
    return np.stack([np.maximum.accumulate(ours + np.arange(len(QUANTILES)) * 1e-6, axis=1),
                     theirs]).astype(np.float32)


def apply(mapping: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """A motion frame with its mouth keys moved onto the person's range (other values kept)."""
    out = coeffs.copy()
    for k, i in enumerate(KEY_INDEX):
        out[i] = np.interp(coeffs[i], mapping[0, k], mapping[1, k])
    return out


def _peak_db(pcm: np.ndarray) -> float:
    x = pcm.astype(np.float32) / 32768
    frames = len(x) // SAMPLES_PER_FRAME
    rms = np.sqrt((x[: frames * SAMPLES_PER_FRAME].reshape(frames, -1) ** 2).mean(1) + 1e-12)
    return float(20 * np.log10(rms.max()))
