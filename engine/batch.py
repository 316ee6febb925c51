"""Batch mode: the Pipeline's stages over a whole recording, decode spread over processes.

Context and motion run in order in this process (the chunk loop carries state from one
chunk to the next); decode is a pure function of each chunk's motion, so chunks go to a
pool of processes, each holding the same DecodeStage for the avatar, and come back in
order. At most `2 x workers` chunks are in flight, so memory does not grow with length.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from pathlib import Path
from typing import Iterator

import numpy as np

from .config import SAMPLES_PER_FRAME, EngineConfig
from .stage import AudioChunk, FrameChunk, MotionChunk
from .state import RollingState

_decode = None  # the DecodeStage of a pool process


def _start(avatar: str) -> None:
    global _decode
    import cv2

    from .avatar import load_portrait
    from .modules.portrait_renderer import PortraitRenderer
    from .stages.decode import DecodeStage

    cv2.setNumThreads(1)
    _decode = DecodeStage(PortraitRenderer(load_portrait(Path(avatar))))


def _run(chunk: MotionChunk) -> FrameChunk:
    return _decode.run(chunk, {})


def batch_frames(pcm_chunks: Iterator[np.ndarray], avatar: Path, seed: int = 0, motion: str = "dit",
                 workers: int = 2, step_frames: int = EngineConfig.chunk_frames) -> Iterator[tuple[FrameChunk, np.ndarray]]:
    """(frames, their audio) per piece of `pcm_chunks`, each a whole number of `step_frames` frames.

    Context and motion see the audio `step_frames` at a time, exactly as a live session
    sends it, so the arithmetic (and so every frame) is the same as streaming.
    """
    from .pipeline import motion_stages

    stages, state = motion_stages(motion), RollingState()
    for stage in stages:
        stage.init_state(state.of(stage.name), seed)
    pool = multiprocessing.get_context("spawn").Pool(workers, _start, (str(avatar),)) if workers else None
    if pool is None:
        _start(str(avatar))
    pending: deque = deque()
    try:
        first = 0
        for pcm in pcm_chunks:
            data = MotionChunk(first, np.concatenate([
                _motion(stages, state, AudioChunk(first + i, step_frames, pcm[i * SAMPLES_PER_FRAME:(i + step_frames) * SAMPLES_PER_FRAME]))
                for i in range(0, len(pcm) // SAMPLES_PER_FRAME, step_frames)]))
            pending.append((pool.apply_async(_run, (data,)) if pool else _run(data), pcm))
            first += data.coeffs.shape[0]
            while len(pending) > 2 * max(workers, 1) or (not pool and pending):
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())
    finally:
        if pool:
            pool.terminate()


def _motion(stages: list, state: RollingState, chunk: AudioChunk) -> np.ndarray:
    data = chunk
    for stage in stages:
        data = stage.run(data, state.of(stage.name))
    return data.coeffs


def _result(item) -> tuple[FrameChunk, np.ndarray]:
    job, pcm = item
    return (job.get() if hasattr(job, "get") else job), pcm
