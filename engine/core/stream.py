"""A recording through a motion pipeline, chunk by chunk, as a live session streams it."""

from __future__ import annotations

import numpy as np

from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.core.pipeline import Pipeline
from engine.core.stage import AudioChunk, MotionChunk
from engine.core.state import RollingState


def motion_track(pipeline: Pipeline, pcm: np.ndarray, delay: int, seed: int = 0,
                 step_frames: int = EngineConfig.chunk_frames) -> np.ndarray:
    """(frames, DIM) motion of a whole recording, streamed in chunks as a live session is.

    A model with lookahead makes frame t's motion when the audio of t + delay has arrived:
    the stream gets that much trailing silence, and the first outputs (frames before the
    recording) are dropped, so row t is frame t's motion, as a viewer sees it.
    """
    state = pipeline.new_state(seed)
    frames = len(pcm) // SAMPLES_PER_FRAME // step_frames * step_frames
    tail = -(-delay // step_frames) * step_frames
    padded = np.concatenate([pcm[: frames * SAMPLES_PER_FRAME], np.zeros(tail * SAMPLES_PER_FRAME, pcm.dtype)])
    out = [motion_chunk(pipeline, state, first, padded[first * SAMPLES_PER_FRAME:], 0, step_frames)
           for first in range(0, frames + delay, step_frames)]
    return np.concatenate(out)[delay: delay + frames] if out else np.zeros((0, 0), np.float32)


def motion_chunk(pipeline: Pipeline, state: RollingState, first: int, pcm: np.ndarray, offset: int,
            frames: int) -> np.ndarray:
    audio = pcm[offset * SAMPLES_PER_FRAME:(offset + frames) * SAMPLES_PER_FRAME]
    motion: MotionChunk = pipeline.render(AudioChunk(first, frames, audio), state)
    return motion.coeffs
