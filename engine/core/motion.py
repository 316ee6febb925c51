"""The motion-coefficient space shared by every audio-to-motion model and the renderer.

One frame of motion is a float32 vector; the names below give each slot its meaning.
Mouth values are in units of the face's own mouth width so they transfer between
portraits; head angles are in radians; blink is 0 (open) to 1 (closed).
"""

from __future__ import annotations

import numpy as np

RANGES: dict[str, tuple[float, float]] = {  # each slot's name and the range a model's output is held to
    "jaw_open": (0, 1),        # lower jaw rotation, lips part
    "lip_width": (-1, 1),      # negative narrows, positive spreads (ee)
    "lip_round": (0, 1),       # rounding / pucker (oo, w)
    "upper_lip": (0, 1),       # extra upper-lip raise
    "lower_lip": (-1, 1),      # extra lower-lip drop (+) or tuck (-)
    "smile": (-1, 1),          # mouth corners up (+) or down (-)
    "blink_l": (0, 1),
    "blink_r": (0, 1),
    "brow": (-1, 1),           # brow raise
    "head_yaw": (-0.5, 0.5),   # radians
    "head_pitch": (-0.5, 0.5),
    "head_roll": (-0.5, 0.5),
    "breath": (-1, 1),         # slow vertical rise of head and shoulders
}
COEFFS: tuple[str, ...] = tuple(RANGES)
INDEX: dict[str, int] = {name: i for i, name in enumerate(COEFFS)}
DIM = len(COEFFS)
MOUTH = ("jaw_open", "lip_width", "lip_round", "upper_lip", "lower_lip", "smile")
MOUTH_INDEX = [INDEX[name] for name in MOUTH]
LOW = np.array([lo for lo, _ in RANGES.values()], np.float32)
HIGH = np.array([hi for _, hi in RANGES.values()], np.float32)
SHUT = 0.1  # jaw_open at or below which the lips are shut


def zeros(frames: int) -> np.ndarray:
    """A neutral motion track of `frames` frames."""
    return np.zeros((frames, DIM), np.float32)
