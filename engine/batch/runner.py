"""Batch mode: the Pipeline's stages over a whole recording, decode spread over processes.

Context and motion run in order in this process (the chunk loop carries state from one
chunk to the next), `step_frames` at a time exactly as a live session sends audio, so
every frame equals the streamed one. A portrait's decode is a pure function of each
chunk's motion (a video avatar's walks its clip, so it decodes here, in order): chunks
go to a pool of processes, each holding the same DecodeStage for the avatar,
which write their frames into a shared-memory ring (no pickling of frames); results
come back in order. At most `2 x workers` chunks are in flight, so memory does not
grow with the recording's length. A motion model that listens ahead makes each
frame's motion `delay` frames late: a silent tail flushes the last frames out, and the
first `delay` outputs (frames before the recording) are dropped, so yielded frame t is
the motion of the audio's frame t.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.core.stage import FrameChunk, MotionChunk
from engine.core.stream import motion_chunk
from engine.families.motion.delay import motion_delay_frames

if TYPE_CHECKING:
    from engine.core.pipeline import Pipeline
    from engine.core.state import RollingState
    from engine.stages.decode import DecodeStage

_decode: DecodeStage | None = None  # a pool process's DecodeStage ...
_ring: np.ndarray | None = None  # ... and its view of the frame ring
_shm: SharedMemory | None = None


def _start(avatar: str, ring_name: str | None, shape: tuple[int, ...]) -> None:
    global _decode, _ring, _shm
    import cv2

    from engine.assembly import renderer_for
    from engine.stages.decode import DecodeStage

    cv2.setNumThreads(1)
    _decode = DecodeStage(renderer_for(Path(avatar)))
    if ring_name:
        _shm = SharedMemory(ring_name)
        _ring = np.ndarray(shape, np.uint8, _shm.buf)


def _run(chunk: MotionChunk, slot: int) -> int:
    assert _decode is not None and _ring is not None  # _start ran in this pool process
    frames = _decode.run(chunk, None).frames
    _ring[slot, : len(frames)] = frames
    return len(frames)


# (job, ring slot, motion, audio, frames to keep): job as in batch_frames
_Pending = tuple[Any, int, MotionChunk, np.ndarray, int | None]


def batch_frames(pcm_chunks: Iterator[np.ndarray], avatar: Path, seed: int = 0, motion: str = "dit",
                 workers: int = 2, max_frames: int = 10, size: int = EngineConfig.size,
                 step_frames: int = EngineConfig.chunk_frames) -> Iterator[tuple[FrameChunk, np.ndarray]]:
    """(frames, their audio) per piece of `pcm_chunks`: each up to `max_frames` frames, a whole
    number of `step_frames`. A yielded chunk's frames are valid until the next one is asked for."""
    from engine.assembly import motion_stages
    from engine.core.pipeline import Pipeline
    from engine.families.video.reference import is_video_avatar

    pipeline = Pipeline(motion_stages(motion))  # motion in order here; decode in the pool
    state, delay = pipeline.new_state(seed), motion_delay_frames(motion)
    if is_video_avatar(avatar):
        workers = 0  # a video avatar's walk runs frame after frame (and costs a few ms a frame)
    in_flight = 2 * max(workers, 1)
    shape = (in_flight + 1, max_frames, size * 3 // 2, size)  # one more slot: the chunk being consumed
    shm = SharedMemory(create=True, size=int(np.prod(shape))) if workers else None
    ring = np.ndarray(shape, np.uint8, shm.buf) if shm else None
    pool = multiprocessing.get_context("spawn").Pool(workers, _start, (str(avatar), shm.name, shape)) if shm else None
    if pool is None:
        _start(str(avatar), None, shape)
        assert _decode is not None
        decode_state = _decode.new_state(seed)
    pending: deque[_Pending] = deque()
    try:
        first, slot = 0, 0
        for pcm, tail in _with_tail(pcm_chunks, -(-delay // step_frames) * step_frames):
            chunk = _piece_motion(pipeline, state, first, pcm, max_frames, step_frames)
            frames = len(chunk.coeffs)
            job: Any  # the pool's AsyncResult[int], or the FrameChunk decoded here
            if pool:
                job = pool.apply_async(_run, (chunk, slot))
            else:
                assert _decode is not None  # _start ran in this process
                job = _decode.run(chunk, decode_state)
            pending.append((job, slot, chunk, pcm[:0] if tail else pcm, delay if tail else None))
            first, slot = first + frames, (slot + 1) % shape[0]
            while len(pending) > in_flight or (pool is None and pending):
                yield _result(pending.popleft(), ring, delay)
        while pending:
            yield _result(pending.popleft(), ring, delay)
    finally:
        if pool:
            pool.terminate()
            pool.join()
        if shm:
            shm.close()
            shm.unlink()


def _piece_motion(pipeline: Pipeline, state: RollingState, first: int, pcm: np.ndarray, max_frames: int,
                  step_frames: int) -> MotionChunk:
    frames = len(pcm) // SAMPLES_PER_FRAME
    if frames > max_frames or frames % step_frames:
        raise ValueError(f"pieces must be up to {max_frames} frames, a multiple of {step_frames}")
    return MotionChunk(first, np.concatenate([motion_chunk(pipeline, state, first + i, pcm, i, step_frames)
                                              for i in range(0, frames, step_frames)]))


def _with_tail(pcm_chunks: Iterator[np.ndarray], frames: int) -> Iterator[tuple[np.ndarray, bool]]:
    """The pieces, then `frames` frames of silence (flagged) that flush a lookahead model."""
    for pcm in pcm_chunks:
        yield pcm, False
    if frames:
        yield np.zeros(frames * SAMPLES_PER_FRAME, np.int16), True


def _result(item: _Pending, ring: np.ndarray | None, delay: int) -> tuple[FrameChunk, np.ndarray]:
    """A decoded chunk on the audio's timeline: `delay` frames earlier; of the tail, only its
    first `delay` frames (the recording's last ones)."""
    job, slot, chunk, pcm, keep = item
    frames = job.frames if ring is None else ring[slot, : job.get()]  # ring None: decoded in this process
    first = chunk.first_frame - delay
    lo, hi = max(0, -first), len(frames) if keep is None else keep
    return FrameChunk(first + lo, frames[lo:hi], chunk.coeffs[lo:hi]), pcm
