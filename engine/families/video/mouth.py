"""The mouth from the person's own pixels.

The bank is every tracked frame of the clip, keyed by the rig coefficients fitted to
its mouth. For each output frame the motion model's mouth coefficients choose a bank
frame (near in mouth shape, near in head turn, and preferring the one after the last
choice, so real mouth motion plays on when it fits); its lower face is aligned to the
walk's frame by a similarity on the points the mouth does not move, colour-matched on
the seam, and blended in under a feathered mask that covers both chins, so neither an
opening nor a closing jaw leaves a second jaw line behind.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.core import motion
from engine.families.portrait.rig_fit import STABLE, similarity

# Bank key: mouth coefficients, weighted by how much each changes the picture.
KEYS = {"jaw_open": 1.0, "lip_width": 0.35, "lip_round": 0.35, "smile": 0.25}
KEY_INDEX = [motion.INDEX[k] for k in KEYS]
KEY_WEIGHT = np.array(list(KEYS.values()), np.float32)
TURN_WEIGHT = 1.5  # a yaw difference of 0.1 (nose offset over face width) costs as much as 0.15 jaw
STAY_BONUS = 0.04  # the next frame of the last choice wins ties: real motion plays on
SCENE_COST = 10.0  # a mouth from another shot of an edited clip: only when its own has none
BLUR_COST = 0.1  # as much as 0.1 of jaw opening, for a mouth with no detail at all
SHORTLIST = 24
MAX_SHIFT = 12.0  # grey levels the seam match may move the patch
# The lower face, from under the nose round the jaw (mediapipe mesh ids).
LOWER_FACE = [205, 36, 98, 2, 327, 266, 425, 411, 416, 367, 397, 365, 379, 378, 400, 377, 152, 148, 176, 149,
              150, 136, 138, 192, 187]


Similarity = tuple[float, float, np.ndarray]  # scale, angle, shift (rig_fit.similarity)


def head_similarity(src: np.ndarray, dst: np.ndarray) -> Similarity:
    """The similarity moving one frame's head onto another's, on the points the mouth does not move."""
    return similarity(src[STABLE].astype(np.float64), dst[STABLE].astype(np.float64))


def affine(transform: Similarity, share: float = 1.0) -> np.ndarray:
    """The (2, 3) matrix of a similarity taken `share` of the way (0: no move)."""
    scale, angle, shift = transform
    s, a = 1 + share * (scale - 1), share * angle
    return np.array([[s * np.cos(a), -s * np.sin(a), share * shift[0]],
                     [s * np.sin(a), s * np.cos(a), share * shift[1]]], np.float32)


def sharpness(rgb: np.ndarray, lm: np.ndarray) -> float:
    """Variance of the Laplacian over the mouth (lips and a margin of 0.3 mouth widths): how
    much fine detail (teeth, lip edges) a frame's mouth shows; motion blur lowers it."""
    lips = lm[[61, 291, 0, 17]]
    margin = 0.3 * np.linalg.norm(lips[1] - lips[0])
    x0, y0 = np.maximum(0, lips.min(0) - margin).astype(int)
    x1, y1 = (lips.max(0) + margin).astype(int)
    grey = cv2.cvtColor(np.ascontiguousarray(rgb[y0:y1, x0:x1]), cv2.COLOR_RGB2GRAY)
    return float(cv2.Laplacian(grey, cv2.CV_64F).var()) if grey.size else 0.0


def turn(landmarks: np.ndarray) -> np.ndarray:
    """Head turn per frame: the nose tip's offset from the cheeks' midpoint, in face widths."""
    left, right, nose = landmarks[..., 234, 0], landmarks[..., 454, 0], landmarks[..., 1, 0]
    return (nose - (left + right) / 2) / np.maximum(right - left, 1e-6)


@dataclass
class MouthChoice:
    last: int = -1  # bank frame chosen for the previous output frame


class MouthBank:
    def __init__(self, landmarks: np.ndarray, coeffs: np.ndarray, tracked: np.ndarray, scene: np.ndarray,
                 detail: np.ndarray | None = None):
        self.landmarks, self.scene = landmarks, scene
        self.frames = np.flatnonzero(tracked)
        # A blurred mouth (motion blur mid-syllable) costs up to BLUR_COST: of two alike the
        # sharper one wins. `detail` is each frame's sharpness() over its shot's median.
        blur = np.clip(1 - (detail if detail is not None else np.ones(len(landmarks))), 0, 1)
        self.blur_cost = BLUR_COST * blur[self.frames]
        self.keys = coeffs[self.frames][:, KEY_INDEX] * KEY_WEIGHT
        self.turns = turn(landmarks)
        self.face_w = float(np.median(np.ptp(landmarks[:, [234, 454], 0], axis=1)))

    def choose(self, target: np.ndarray, base: int, state: MouthChoice) -> int:
        """The bank frame that shows the target mouth best on the base frame."""
        key = target[KEY_INDEX] * KEY_WEIGHT
        d = np.sqrt(((self.keys - key) ** 2).sum(1))
        d += TURN_WEIGHT * np.abs(self.turns[self.frames] - self.turns[base])
        d += SCENE_COST * (self.scene[self.frames] != self.scene[base])
        d += self.blur_cost
        short = np.argpartition(d, min(SHORTLIST, len(d) - 1))[:SHORTLIST]
        cost = d[short] - STAY_BONUS * (self.frames[short] == state.last + 1)
        state.last = int(self.frames[short[np.argmin(cost)]])
        return state.last

    def composite(self, base_rgb: np.ndarray, base: int, source_rgb: np.ndarray, source: int) -> np.ndarray:
        """The base frame with the source frame's lower face blended in (in place)."""
        if source == base:
            return base_rgb
        dst = self.landmarks[base]
        warp = affine(head_similarity(self.landmarks[source], dst))
        src_poly = self.landmarks[source][LOWER_FACE] @ warp[:, :2].T + warp[:, 2]
        poly = np.vstack([dst[LOWER_FACE], src_poly])
        pad = 0.08 * self.face_w
        size = base_rgb.shape[0]
        x0, y0 = np.maximum(0, np.floor(poly.min(0) - pad)).astype(int)
        x1, y1 = np.minimum(size, np.ceil(poly.max(0) + pad)).astype(int)
        if x1 - x0 < 4 or y1 - y0 < 4:
            return base_rgb
        roi = warp.copy()
        roi[:, 2] -= (x0, y0)  # warp straight into the box: a full-frame warp would cost 4x
        patch = cv2.warpAffine(source_rgb, roi, (x1 - x0, y1 - y0), flags=cv2.INTER_CUBIC,
                               borderMode=cv2.BORDER_REPLICATE).astype(np.float32)
        mask = self._mask(dst[LOWER_FACE], src_poly, (x0, y0), (y1 - y0, x1 - x0))
        target = base_rgb[y0:y1, x0:x1].astype(np.float32)
        seam = (mask > 0.15) & (mask < 0.85)
        if seam.sum() > 16:  # lighting drifts over a take: match the patch to the frame on the seam
            # (the median, and bounded: the seam also crosses collar and background)
            shift = np.median(target[seam] - patch[seam], axis=0)
            patch += np.clip(shift, -MAX_SHIFT, MAX_SHIFT)[None, None]
        m = mask[..., None]
        base_rgb[y0:y1, x0:x1] = np.clip(patch * m + target * (1 - m), 0, 255).astype(np.uint8)
        return base_rgb

    def _mask(self, a: np.ndarray, b: np.ndarray, origin: tuple[int, int], shape: tuple[int, int]) -> np.ndarray:
        mask = np.zeros(shape, np.uint8)
        for poly in (a, b):
            cv2.fillPoly(mask, [np.round(poly - origin).astype(np.int32)], 255, cv2.LINE_AA)
        sigma = 0.03 * self.face_w
        # grown first, so the feather falls outside the jaw line rather than across it
        grow = int(2 * sigma) * 2 + 1
        grown = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow)))
        return cv2.GaussianBlur(grown.astype(np.float32) / 255, (0, 0), sigma)
