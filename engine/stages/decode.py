"""Decode: motion coefficients -> I420 frames, with the portrait renderer."""

from __future__ import annotations

import numpy as np

from engine.core.stage import FrameChunk, MotionChunk, Stage
from engine.families.portrait.renderer import PortraitRenderer


class DecodeStage(Stage[MotionChunk, FrameChunk, None]):
    name = "decode"

    def __init__(self, renderer: PortraitRenderer):
        self.renderer = renderer

    def new_state(self, seed: int) -> None:
        return None  # rendering keeps nothing between chunks

    def run(self, data: MotionChunk, state: None) -> FrameChunk:
        frames = np.stack([self.renderer.render_i420(c) for c in data.coeffs])
        return FrameChunk(data.first_frame, frames, data.coeffs)
