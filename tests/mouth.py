"""Measuring the mouth in rendered frames: how many dark (open-mouth) pixels it shows."""

from __future__ import annotations

import numpy as np

from engine.families.portrait.avatar import DEFAULT_AVATAR, cache_path

DARK_LUMA = 90  # the real inner mouth is shaded, not black
OPEN = 100  # dark pixels of a visibly open mouth. The portrait draws lips shut up to jaw_open 0.1
# (rig.DRAWN_JAW); the default avatar shows 6 there, 26 at 0.15 and 160 at 0.2. 100 is where
# mediapipe reads about 0.07 eye distances, the opening that real held-out speakers pass in 39 %
# of their clips' frames (ours: 42 %; training/motion/judge.py's clips)
OPEN_SHARE = 0.15  # share of speech frames above OPEN that shows a talking mouth. Drawn as open as
# real people's, the mouth passes 0.07 eye distances in 34 % of jfk.flac's frames, where this
# count gives 25 % (a mouth drawn open in 69 % of real clips' frames, 1.8x as often as the
# people's own, passed 0.3 here)


def mouth_box(pad: float = 0.12) -> tuple[int, int, int, int]:
    """Around the lips with room for the jaw to drop, inside the cheeks even when the head sways."""
    lm = np.load(cache_path(DEFAULT_AVATAR))
    lips = lm[[61, 291, 0, 17]]
    w = lips[1, 0] - lips[0, 0]
    x0, x1 = lips[0, 0] - pad * w, lips[1, 0] + pad * w
    # Speech drops the lower lip at most 0.21 mouth widths (rig.DRAWN_JAW at the published jaw's
    # 0.6), inside the box's 0.3 below the lips. 0.4 below them reached the collar when idle
    # breathing and sway lifted it: 136-204 dark pixels in silence for 3 of 6 seeds
    y0, y1 = lips[2, 1] - 0.3 * w, lips[3, 1] + 0.3 * w
    return int(x0), int(y0), int(x1), int(y1)


def dark_pixels(rgb: np.ndarray, box=None) -> int:
    """Pixels darker than the lips and skin inside the mouth box: the open mouth's cavity."""
    x0, y0, x1, y1 = box or mouth_box()
    crop = rgb[y0:y1, x0:x1].astype(np.float32)
    luma = crop @ np.array([0.299, 0.587, 0.114], np.float32)
    return int((luma < DARK_LUMA).sum())

