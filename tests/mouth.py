"""Measuring the mouth in rendered frames: how many dark (open-mouth) pixels it shows."""

from __future__ import annotations

import numpy as np

from engine.families.portrait.avatar import DEFAULT_AVATAR, cache_path

DARK_LUMA = 90  # the real inner mouth is shaded, not black: at 70 jaw_open 0.25 showed 176
# pixels, at 90 it shows 280 (shut: 6; 0.1: 222; 0.5: 556)


def mouth_box(pad: float = 0.12) -> tuple[int, int, int, int]:
    """Around the lips with room for the jaw to drop, inside the cheeks even when the head sways."""
    lm = np.load(cache_path(DEFAULT_AVATAR))
    lips = lm[[61, 291, 0, 17]]
    w = lips[1, 0] - lips[0, 0]
    x0, x1 = lips[0, 0] - pad * w, lips[1, 0] + pad * w
    y0, y1 = lips[2, 1] - 0.3 * w, lips[3, 1] + 0.4 * w  # the jaw drops: room below, above the collar
    return int(x0), int(y0), int(x1), int(y1)


def dark_pixels(rgb: np.ndarray, box=None) -> int:
    """Pixels darker than the lips and skin inside the mouth box: the open mouth's cavity."""
    x0, y0, x1, y1 = box or mouth_box()
    crop = rgb[y0:y1, x0:x1].astype(np.float32)
    luma = crop @ np.array([0.299, 0.587, 0.114], np.float32)
    return int((luma < DARK_LUMA).sum())

