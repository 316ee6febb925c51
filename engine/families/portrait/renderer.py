"""The default decoder: warps a reference portrait by motion coefficients.

Per frame: a TPS field over the face (jaw, lips, lids, brows) from precomputed
bases, inverted to a backward map and applied with one remap of the face box; the
mouth interior is painted where the lips part; then a soft-masked head motion
(yaw, pitch, roll, breathing) moves head and shoulders with one full-frame remap.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.core import motion
from engine.families.portrait.avatar import Portrait
from engine.families.portrait.mouth_interior import build_atlas, composite
from engine.families.portrait.rig import PARTING, FaceRig
from engine.families.portrait.warp import TpsGrid, invert

GRID_STEP = 4  # pixels between TPS grid points; the map is upsampled from it
HEAD_MAP_DIV = 4  # the head-motion field is summed at 1/4 size
HEAD_TRAVEL = 0.9  # face widths the head moves sideways (yaw) or down (pitch) per radian


def _box(points: np.ndarray, pad: float, size: int, step: int) -> tuple[int, int, int, int]:
    lo, hi = points.min(0), points.max(0)
    margin = pad * (hi - lo)
    x0, y0 = np.maximum(0, np.floor(lo - margin)).astype(int)
    x1, y1 = np.minimum(size - 1, np.ceil(hi + margin)).astype(int)
    # Whole grid cells, so the upsampled map lines up with the pixels.
    x1 = x0 + (x1 - x0) // step * step
    y1 = y0 + (y1 - y0) // step * step
    return int(x0), int(y0), int(x1), int(y1)


class PortraitRenderer:
    """Renders one portrait; build once per avatar, call `render` per frame."""

    def __init__(self, portrait: Portrait):
        self.image = portrait.image
        self.size = portrait.size
        self.rig = FaceRig(portrait.landmarks)
        self.face_box = _box(portrait.landmarks, 0.18, self.size, GRID_STEP)
        border = self._box_border(self.face_box)
        centres = np.vstack([self.rig.points, border])
        self.tps = TpsGrid(centres, self.face_box, GRID_STEP)
        # The field is linear in the rig's terms: one field per term that moves anything, so a
        # frame sums a dozen fields instead of interpolating ~250 control points onto the grid
        terms = self.rig.terms
        self._moving = np.flatnonzero(np.abs(terms).reshape(len(terms), -1).max(1) > 0)
        border_values = np.zeros((len(border), 2), np.float32)
        self._fields = np.stack([self.tps.field(np.vstack([terms[i], border_values])) for i in self._moving])
        f = self.rig.frame
        mouth_pts = np.array([f.mouth_center - 0.9 * f.mouth_width, f.mouth_center + 0.9 * f.mouth_width])
        self.mouth_box = _box(mouth_pts, 0.0, self.size, 1)
        self.atlas = build_atlas(self.rig, self.image, self.mouth_box)
        # the jaw's own move of the lower and the upper lip's middle per unit: the teeth follow them
        lips = [self.rig.index[14], self.rig.index[13]]
        self._lip_jaw, self._lip_part = self.rig.jaw_only[lips], self.rig.part[lips]
        bases = self._head_bases(portrait.landmarks)
        low = self.size // HEAD_MAP_DIV  # the head field is smooth: sum it small, then upsample
        self._head_index = [motion.INDEX[k] for k in bases]
        self._head = np.stack([cv2.resize(b, (low, low), interpolation=cv2.INTER_AREA) for b in bases.values()])
        # (x, y) of every pixel, one two-channel map: remap takes it whole, and the warp's map
        # is one scaleAdd (two numpy subtractions on strided planes cost half the warp again)
        self._ident = _pixel_grid(self.size)
        self._half = _pixel_grid(self.size // 2)

    def _box_border(self, box: tuple[int, int, int, int]) -> np.ndarray:
        """Fixed points along the face box so the field fades to zero at its edges."""
        x0, y0, x1, y1 = box
        t = np.linspace(0, 1, 7)[:-1]
        top = np.stack([x0 + t * (x1 - x0), np.full_like(t, y0)], 1)
        right = np.stack([np.full_like(t, x1), y0 + t * (y1 - y0)], 1)
        bottom = np.stack([x1 - t * (x1 - x0), np.full_like(t, y1)], 1)
        left = np.stack([np.full_like(t, x0), y1 - t * (y1 - y0)], 1)
        return np.vstack([top, right, bottom, left]).astype(np.float32)

    def _head_bases(self, lm: np.ndarray) -> dict[str, np.ndarray]:
        """Full-frame displacement per unit of yaw, pitch, roll and breath, under a soft head mask."""
        yy, xx = np.mgrid[0 : self.size, 0 : self.size].astype(np.float32)
        lo, hi = lm.min(0), lm.max(0)
        centre, half = (lo + hi) / 2, (hi - lo) / 2
        r = np.sqrt(((xx - centre[0]) / (1.9 * half[0])) ** 2 + ((yy - centre[1]) / (1.7 * half[1])) ** 2)
        mask = np.clip(1.6 - r, 0, 1) ** 1.5
        mask = cv2.GaussianBlur(mask, (0, 0), 9)
        neck = np.array([centre[0], hi[1] + 0.3 * half[1]])
        face_w = 2 * half[0]
        body = np.clip((yy - hi[1]) / (0.5 * self.size), 0, 1) * 0.7  # shoulders rise with breath
        return {
            "head_yaw": np.stack([mask * face_w * HEAD_TRAVEL, np.zeros_like(mask)], -1),
            "head_pitch": np.stack([np.zeros_like(mask), mask * face_w * HEAD_TRAVEL], -1),
            "head_roll": np.stack([-(yy - neck[1]) * mask, (xx - neck[0]) * mask], -1),
            "breath": np.stack([np.zeros_like(mask), -(0.012 * self.size) * np.maximum(mask, body)], -1),
        }

    def new_state(self, seed: int) -> None:
        return None  # a portrait frame depends on its coefficients alone

    def render(self, coeffs: np.ndarray) -> np.ndarray:
        """One RGB frame (size, size, 3) uint8 for a motion vector of length motion.DIM."""
        return self._move_head(self._face(coeffs), coeffs)

    def render_i420(self, coeffs: np.ndarray, state: None = None) -> np.ndarray:
        """The same frame as I420 (size * 3 // 2, size), what the encoders take.

        The head moves after the colour conversion, plane by plane: a full-frame warp of
        one luma and two quarter-size chroma planes costs half that of three RGB channels.
        """
        s, h = self.size, self.size // 2
        yuv = cv2.cvtColor(self._face(coeffs), cv2.COLOR_RGB2YUV_I420)
        small = self._head_small(coeffs)
        out = np.empty_like(yuv)
        out[:s] = _remap(yuv[:s], cv2.scaleAdd(cv2.resize(small, (s, s), interpolation=cv2.INTER_LINEAR),
                                               -1.0, self._ident))
        half_map = cv2.scaleAdd(cv2.resize(small, (h, h), interpolation=cv2.INTER_LINEAR), -0.5, self._half)
        for first in (s, s + h // 2):  # U then V: each (h, h), stored as h / 2 rows of s
            plane = yuv[first:first + h // 2].reshape(h, h)
            out[first:first + h // 2] = _remap(plane, half_map).reshape(h // 2, s)
        return out

    def _face(self, coeffs: np.ndarray) -> np.ndarray:
        """The portrait with the face warped and the mouth interior painted, head not yet moved."""
        frame = self.image.copy()
        coeffs = self.rig.as_drawn(coeffs)
        weights = self.rig.weights(coeffs)
        self._warp_face(frame, np.tensordot(weights[self._moving], self._fields, axes=1))
        jaw = coeffs[motion.INDEX["jaw_open"]] * self._lip_jaw + weights[PARTING] * self._lip_part
        composite(frame, self.rig, self.atlas, self.mouth_box, self.rig.displacement(coeffs), jaw)
        return frame

    def _warp_face(self, frame: np.ndarray, forward: np.ndarray) -> None:
        """Warp the face box by a forward displacement field on the TPS grid."""
        source = invert(forward, self.tps.grid, GRID_STEP)
        x0, y0, x1, y1 = self.face_box
        full = cv2.resize(source, (x1 - x0 + 1, y1 - y0 + 1), interpolation=cv2.INTER_LINEAR)
        frame[y0 : y1 + 1, x0 : x1 + 1] = _remap(self.image, full)

    def _move_head(self, frame: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
        d = cv2.resize(self._head_small(coeffs), (self.size, self.size), interpolation=cv2.INTER_LINEAR)
        return _remap(frame, cv2.scaleAdd(d, -1.0, self._ident))

    def _head_small(self, coeffs: np.ndarray) -> np.ndarray:
        """Head and breath displacement in full-frame pixels, at 1 / HEAD_MAP_DIV size."""
        return np.tensordot(coeffs[self._head_index].astype(np.float32), self._head, axes=1)


def _pixel_grid(size: int) -> np.ndarray:
    """(size, size, 2) float32: each pixel's own (x, y)."""
    yx = np.mgrid[0:size, 0:size].astype(np.float32)
    return np.ascontiguousarray(np.dstack([yx[1], yx[0]]))


def _remap(image: np.ndarray, source: np.ndarray) -> np.ndarray:
    """`image` sampled at `source` (H, W, 2: x, y per output pixel)."""
    return cv2.remap(image, source, None, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
