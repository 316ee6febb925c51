"""The refinement slot's paste-back: the generated square head, feathered into a wider frame.

The model generates 512x512; a 1280x720 stream shows that head where the photo had it, in the
photo's own surroundings (engine/families/portrait/scene.py). Only the head's square changes
from frame to frame, so the still frame is converted to I420 once and each frame blends and
converts the square alone. The blend ramps over FEATHER of the square's side on each edge that
lies inside the frame (an edge on the frame's border needs none), which hides the seam
between what the model redrew and the photo.
"""

from __future__ import annotations

import cv2
import numpy as np

FEATHER = 0.08  # of the head's side


class PasteBack:
    """head RGB (any square size) -> a width x height I420 frame."""

    def __init__(self, still: np.ndarray, box: tuple[int, int, int]):
        self.height, self.width = still.shape[:2]
        self.x, self.y, self.side = box
        self.still = np.ascontiguousarray(still[self.y : self.y + self.side, self.x : self.x + self.side])
        self.i420 = cv2.cvtColor(still, cv2.COLOR_RGB2YUV_I420)
        self.weight = self._weight()

    def _weight(self) -> np.ndarray:
        """Per pixel of the square: 1 inside, falling to 0 at the edges that lie inside the frame."""
        ramp = np.clip((np.arange(self.side, dtype=np.float32) + 0.5) / max(FEATHER * self.side, 1.0), 0, 1)
        inside = (self.x > 0, self.x + self.side < self.width, self.y > 0, self.y + self.side < self.height)
        one = np.ones(self.side, np.float32)
        across = np.minimum(ramp if inside[0] else one, ramp[::-1] if inside[1] else one)
        down = np.minimum(ramp if inside[2] else one, ramp[::-1] if inside[3] else one)
        return np.ascontiguousarray(down[:, None] * across[None, :])

    def __call__(self, head: np.ndarray) -> np.ndarray:
        if head.shape[0] != self.side:
            head = cv2.resize(head, (self.side, self.side), interpolation=cv2.INTER_LINEAR)
        blended = cv2.blendLinear(head, self.still, self.weight, 1 - self.weight)
        yuv = cv2.cvtColor(blended, cv2.COLOR_RGB2YUV_I420)
        out = self.i420.copy()
        self._planes(out, yuv)
        return out

    def _planes(self, frame: np.ndarray, square: np.ndarray) -> None:
        """Write a square's I420 (Y, then U and V, each plane packed) into the frame's planes
        at the head's place."""
        w, h, s, x, y = self.width, self.height, self.side, self.x, self.y
        whole, part = frame.reshape(-1), square.reshape(-1)
        # (subsampling, where the plane starts in the frame, where in the square): Y, U, V
        for k, into, start in ((1, 0, 0), (2, w * h, s * s), (2, w * h * 5 // 4, s * s * 5 // 4)):
            plane = whole[into : into + (w // k) * (h // k)].reshape(h // k, w // k)
            n = s // k
            plane[y // k : y // k + n, x // k : x // k + n] = part[start : start + n * n].reshape(n, n)
