"""The video avatar's decoder: the walk's frame of the clip, with the driven mouth blended in.

Per output frame: the walk gives one clip frame (two, weighted, across a move); the
mouth bank picks the person's own mouth for the motion model's coefficients and
composites it onto each. The head, body, eyes and brows are the clip's own, so the
model's head and blink coefficients are not used here.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import cv2
import numpy as np

from engine.families.video import adapt
from engine.families.video.mouth import MouthBank, MouthChoice, affine, head_similarity
from engine.families.video.reference import VideoReference
from engine.families.video.walk import ClipWalk, WalkState, smooth_threshold

CACHE_FRAMES = 12  # decoded frames kept: the walk and the bank revisit the last few often


@dataclass
class VideoState:
    walk: WalkState
    mouth: MouthChoice = field(default_factory=MouthChoice)


class VideoRenderer:
    """Renders one video avatar; build once per avatar, share across its sessions."""

    def __init__(self, reference: VideoReference):
        self.ref = reference
        self.size = reference.size
        self.bank = MouthBank(reference.landmarks, reference.coeffs, reference.tracked, reference.scene,
                               reference.detail)
        self.walk = ClipWalk(reference.jump_to, reference.jump_cost, reference.scene, reference.segment,
                             smooth_threshold(reference.landmarks))
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()

    def new_state(self, seed: int) -> VideoState:
        return VideoState(self.walk.new_state(seed))

    def render(self, coeffs: np.ndarray, state: VideoState) -> np.ndarray:
        """One RGB frame for a motion vector; advances the session's walk by a frame.

        Across a move both moments get the same mouth (each aligned to its own frame), so the
        cross-fade blends two heads, never two different mouths.
        """
        pos, faded, weight = self.walk.step(state.walk)
        coeffs = adapt.apply(self.ref.mouth_gain, coeffs)
        source = self.bank.choose(coeffs, pos, state.mouth)
        frame = self._mouthed(pos, source)
        if faded < 0:
            return frame
        # A morph, not a plain cross-fade: each side is moved part of the way onto the other's
        # head (a similarity on the points the mouth does not move), so two heads a few
        # pixels apart slide into one instead of showing double.
        other = self._mouthed(faded, source)
        lm = self.ref.landmarks
        frame = _warp(frame, affine(head_similarity(lm[pos], lm[faded]), 1 - weight))
        other = _warp(other, affine(head_similarity(lm[faded], lm[pos]), weight))
        return cv2.addWeighted(frame, weight, other, 1 - weight, 0)

    def render_i420(self, coeffs: np.ndarray, state: VideoState) -> np.ndarray:
        return cv2.cvtColor(self.render(coeffs, state), cv2.COLOR_RGB2YUV_I420)

    def _mouthed(self, base: int, source: int) -> np.ndarray:
        return self.bank.composite(self._frame(base).copy(), base, self._frame(source), source)

    def _frame(self, t: int) -> np.ndarray:
        if t in self._cache:
            self._cache.move_to_end(t)
            return self._cache[t]
        frame = self.ref.decode(t)
        self._cache[t] = frame
        if len(self._cache) > CACHE_FRAMES:
            self._cache.popitem(last=False)
        return frame


def _warp(rgb: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    return cv2.warpAffine(rgb, matrix, (rgb.shape[1], rgb.shape[0]), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)
