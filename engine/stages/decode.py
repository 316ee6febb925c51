"""Decode: motion coefficients -> I420 frames, with the avatar's renderer.

A portrait renderer keeps nothing between frames (its state is None); a video avatar's
keeps the session's walk through its clip and its last mouth choices.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from engine.core.stage import FrameChunk, MotionChunk, Stage


class Renderer(Protocol):
    size: int

    def new_state(self, seed: int) -> Any: ...

    def render_i420(self, coeffs: np.ndarray, state: Any) -> np.ndarray: ...


class DecodeStage(Stage[MotionChunk, FrameChunk, Any]):
    name = "decode"

    def __init__(self, renderer: Renderer):
        self.renderer = renderer

    def new_state(self, seed: int) -> Any:
        return self.renderer.new_state(seed)

    def run(self, data: MotionChunk, state: Any) -> FrameChunk:
        frames = np.stack([self.renderer.render_i420(c, state) for c in data.coeffs])
        return FrameChunk(data.first_frame, frames, data.coeffs)
