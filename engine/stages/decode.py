"""Decode: motion coefficients -> I420 frames, with the portrait renderer."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.core.stage import FrameChunk, MotionChunk, Stage
from engine.families.portrait.renderer import PortraitRenderer


class DecodeStage(Stage[MotionChunk, FrameChunk]):
    name = "decode"

    def __init__(self, renderer: PortraitRenderer):
        self.renderer = renderer

    def run(self, data: MotionChunk, state: dict[str, Any]) -> FrameChunk:
        frames = np.stack([self.renderer.render_i420(c) for c in data.coeffs])
        return FrameChunk(data.first_frame, frames, data.coeffs)
