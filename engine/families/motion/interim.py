"""INTERIM audio-to-motion: a hand-set mapping from loudness and spectral shape to the mouth.

The trained MotionDiT replaced it as the default; it stays as the baseline the
evaluation compares against and as a fallback (AVATAR_MOTION_MODEL=interim). It is a real
driver (the mouth follows the actual audio), not a canned animation: loudness opens
the jaw, bright spectra spread the lips, dark voiced spectra round them, and
fricative-heavy frames keep the jaw nearly closed and tuck the lower lip. An
attack/release filter keeps the motion smooth across frames and chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core import motion
from engine.core.module import Module

J, W, R, LL = (motion.INDEX[k] for k in ("jaw_open", "lip_width", "lip_round", "lower_lip"))


@dataclass(frozen=True)
class InterimMotionConfig:
    gate_db: float = 9.0
    """Loudness above the tracked noise floor at which the mouth starts to open."""
    range_db: float = 24.0
    """Loudness span from closed to fully driven."""
    min_floor_db: float = -62.0
    """The noise floor never tracks below this (digital silence is not a floor)."""
    initial_floor_db: float = -46.0
    """Noise-floor prior for a new session (a quiet room through a microphone)."""
    floor_rise_db: float = 0.2
    """Per-frame upward drift of the noise-floor tracker; it falls at once."""
    jaw_gain: float = 0.62
    attack: float = 0.65
    """Per-frame smoothing towards a more open mouth (1 = instant)."""
    release: float = 0.45
    """Per-frame smoothing towards a more closed mouth."""



@dataclass
class InterimState:
    mouth: np.ndarray  # the smoothed mouth coefficients
    floor: np.ndarray  # the adaptive noise floor, dB

class InterimMotionModule(Module):
    """Loudness/spectrum -> mouth coefficients; see the module docstring."""

    name = "interim_motion"

    def __init__(self, config: InterimMotionConfig = InterimMotionConfig()):
        super().__init__()
        self.config = config

    def initial_state(self, seed: int) -> InterimState:
        return InterimState(np.zeros(motion.DIM, np.float32), np.array([self.config.initial_floor_db]))

    def loudness(self, loudness_db: np.ndarray, state: InterimState) -> np.ndarray:
        """0..1 speech loudness over an adaptive noise floor, so room noise keeps the mouth shut."""
        c, floor = self.config, state.floor
        out = np.empty(len(loudness_db), np.float32)
        for i, db in enumerate(loudness_db):
            floor[0] = max(c.min_floor_db, min(float(db), floor[0] + c.floor_rise_db))
            out[i] = np.clip((db - floor[0] - c.gate_db) / c.range_db, 0, 1)
        return out

    def targets(self, features: np.ndarray, loud: np.ndarray) -> np.ndarray:
        c = self.config
        centroid, low, high = features[:, 1], features[:, 2], features[:, 3]
        fricative = np.clip((high - 0.25) * 2.5, 0, 1)
        out = np.zeros((len(features), motion.DIM), np.float32)
        out[:, J] = c.jaw_gain * loud**0.8 * (1 - 0.7 * fricative) * (0.6 + 0.4 * low)
        out[:, W] = np.clip((centroid - 0.32) * 3.0, -1, 1) * loud
        out[:, R] = np.clip((0.22 - centroid) * 5.0, 0, 1) * loud * low
        out[:, LL] = -0.6 * fricative * loud
        return out

    def __call__(self, features: np.ndarray, state: InterimState) -> tuple[np.ndarray, np.ndarray]:
        """Mouth motion (frames, DIM) and the 0..1 loudness that drove it."""
        loud = self.loudness(features[:, 0], state)
        targets = self.targets(features, loud)
        current = state.mouth
        out = np.empty_like(targets)
        for i, target in enumerate(targets):
            rate = np.where(target > current, self.config.attack, self.config.release)
            current = current + rate * (target - current)
            out[i] = current
        state.mouth = current.astype(np.float32)
        return out, loud
