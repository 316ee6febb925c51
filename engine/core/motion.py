"""The motion-coefficient space shared by every audio-to-motion model and the renderer.

One frame of motion is a float32 vector; the names below give each slot its meaning.
Mouth values are in units of the face's own mouth width so they transfer between
portraits; head angles are in radians; blink is 0 (open) to 1 (closed).
"""

from __future__ import annotations

import numpy as np

COEFFS: tuple[str, ...] = (
    "jaw_open",    # 0..1, lower jaw rotation, lips part
    "lip_width",   # -1..1, negative narrows, positive spreads (ee)
    "lip_round",   # 0..1, rounding / pucker (oo, w)
    "upper_lip",   # 0..1, extra upper-lip raise
    "lower_lip",   # -1..1, extra lower-lip drop (+) or tuck (-)
    "smile",       # -1..1, mouth corners up (+) or down (-)
    "blink_l",     # 0..1
    "blink_r",     # 0..1
    "brow",        # -1..1, brow raise
    "head_yaw",    # radians
    "head_pitch",  # radians
    "head_roll",   # radians
    "breath",      # -1..1, slow vertical rise of head and shoulders
)
INDEX: dict[str, int] = {name: i for i, name in enumerate(COEFFS)}
DIM = len(COEFFS)
MOUTH = ("jaw_open", "lip_width", "lip_round", "upper_lip", "lower_lip", "smile")
MOUTH_INDEX = [INDEX[name] for name in MOUTH]


def zeros(frames: int) -> np.ndarray:
    """A neutral motion track of `frames` frames."""
    return np.zeros((frames, DIM), np.float32)
