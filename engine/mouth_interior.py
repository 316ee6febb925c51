"""The inside of the mouth where the lips part: teeth, cavity, tongue and shading.

Upper teeth stay with the skull, lower teeth move with the jaw. A portrait that shows
its teeth lends them (its own inner-mouth pixels, split at the lip midline); one with
closed lips gets synthesised teeth. Nothing is ever stretched from the lip texture.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from .face_model import LOWER_INNER, UPPER_INNER, FaceRig

CAVITY_TOP = np.array([38, 12, 14], np.float32)
CAVITY_TONGUE = np.array([150, 62, 66], np.float32)
TEETH = np.array([232, 226, 212], np.float32)


@dataclass
class TeethAtlas:
    """Upper and lower teeth as RGBA images in reference coordinates of the mouth box."""

    upper: np.ndarray  # (h, w, 4) float32, alpha last
    lower: np.ndarray


def _curve(points: np.ndarray, xs: np.ndarray) -> np.ndarray:
    order = np.argsort(points[:, 0])
    return np.interp(xs, points[order, 0], points[order, 1])


def _split_masks(rig: FaceRig, box, upper_pts, lower_pts) -> tuple[np.ndarray, np.ndarray]:
    x0, y0, x1, y1 = box
    xs = np.arange(x0, x1, dtype=np.float32)
    mid = (_curve(upper_pts, xs) + _curve(lower_pts, xs)) / 2
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]
    above = ys < mid[None, :]
    return above, ~above


def build_atlas(rig: FaceRig, image: np.ndarray, box) -> TeethAtlas:
    """Use the portrait's own teeth when it shows them, else synthesise a set."""
    x0, y0, x1, y1 = box
    up, low = rig.lm[UPPER_INNER], rig.lm[LOWER_INNER]
    poly = np.vstack([up, low[::-1]]) - (x0, y0)
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillPoly(mask, [np.round(poly).astype(np.int32)], 1)
    crop = image[y0:y1, x0:x1].astype(np.float32)
    shows_teeth = mask.sum() > 0.02 * rig.frame.mouth_width**2 and crop[mask > 0].mean() > 110
    above, below = _split_masks(rig, box, up, low)
    if shows_teeth:
        alpha = cv2.erode(mask, np.ones((3, 3), np.uint8)).astype(np.float32)
        return TeethAtlas(np.dstack([crop, alpha * above]), np.dstack([crop, alpha * below]))
    return _synthetic_atlas(rig, box, above)


def _synthetic_atlas(rig: FaceRig, box, above: np.ndarray) -> TeethAtlas:
    x0, y0, x1, y1 = box
    w = rig.frame.mouth_width
    xs = np.arange(x0, x1, dtype=np.float32)[None, :]
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]
    mid = _curve((rig.lm[UPPER_INNER] + rig.lm[LOWER_INNER]) / 2, xs[0])[None, :]
    lat = (xs - rig.frame.mouth_center[0]) / (0.42 * w)
    span = np.clip(1 - lat**4, 0, 1)
    tooth = 0.9 + 0.1 * np.cos(np.pi * lat * 4.5) ** 8  # faint separations between teeth
    def band(depth: np.ndarray, height: float) -> np.ndarray:
        inside = np.clip(depth / 2, 0, 1) * np.clip((height * span - depth) / 2, 0, 1)
        shade = 1 - 0.25 * np.clip(depth / max(height, 1), 0, 1)
        rgb = TEETH[None, None, :] * (tooth * shade)[..., None]
        return np.dstack([rgb, inside])
    return TeethAtlas(band(ys - mid, 0.13 * w), band(mid - ys, 0.09 * w))


def composite(frame: np.ndarray, rig: FaceRig, atlas: TeethAtlas, box, disp: np.ndarray, jaw: np.ndarray) -> None:
    """Paint the mouth interior into `frame` (in place) for control displacements `disp`.

    Work is limited to the bounding rectangle of the parted lips inside the mouth box.
    """
    x0, y0, x1, y1 = box
    pts = rig.points + disp
    up = pts[[rig.index[i] for i in UPPER_INNER]]
    low = pts[[rig.index[i] for i in LOWER_INNER]]
    poly = np.vstack([up, low[::-1]]) - (x0, y0)
    bx, by, bw, bh = cv2.boundingRect(np.round(poly).astype(np.int32))
    sx0, sy0 = max(bx - 2, 0), max(by - 2, 0)  # 2 px: the anti-aliased edge reaches past the rect
    sx1, sy1 = min(bx + bw + 2, x1 - x0), min(by + bh + 2, y1 - y0)
    if sx1 <= sx0 or sy1 <= sy0:
        return
    mask = np.zeros((sy1 - sy0, sx1 - sx0), np.uint8)
    cv2.fillPoly(mask, [np.round((poly - (sx0, sy0)) * 4).astype(np.int32)], 255, cv2.LINE_AA, shift=2)
    if not mask.any():
        return
    xs = np.arange(x0 + sx0, x0 + sx1, dtype=np.float32)
    top, bottom = _curve(up, xs), _curve(low, xs)
    ys = np.arange(y0 + sy0, y0 + sy1, dtype=np.float32)[:, None]
    depth = np.clip((ys - top) / np.maximum(bottom - top, 1.0), 0, 1)
    above = ys < (top + bottom) / 2
    gx, gy = np.meshgrid(np.arange(sx0, sx1, dtype=np.float32), np.arange(sy0, sy1, dtype=np.float32))
    lower = cv2.remap(atlas.lower, gx - jaw[0], gy - jaw[1], cv2.INTER_LINEAR, borderValue=0)
    teeth = np.where(above[..., None], atlas.upper[sy0:sy1, sx0:sx1], lower)
    tongue = np.clip((depth - 0.55) / 0.45, 0, 1)[..., None]
    cavity = CAVITY_TOP + (CAVITY_TONGUE - CAVITY_TOP) * tongue
    alpha = teeth[..., 3:4]
    interior = teeth[..., :3] * alpha + cavity * (1 - alpha)
    opening = np.clip((bottom - top) / (0.25 * rig.frame.mouth_width), 0, 1)
    lip_shadow = 0.55 + 0.45 * np.sin(np.pi * depth) ** 0.5 * (0.4 + 0.6 * opening)
    interior *= lip_shadow[..., None]
    m = (mask.astype(np.float32) / 255)[..., None]
    target = frame[y0 + sy0:y0 + sy1, x0 + sx0:x0 + sx1]
    target[:] = (target.astype(np.float32) * (1 - m) + interior * m).astype(np.uint8)
