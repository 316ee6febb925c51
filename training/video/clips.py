"""Writing clips: real ones joined into one upload (as a user would film a longer take),
and made-up ones for the refusal tests."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import av
import numpy as np

from engine.config import FPS, SAMPLE_RATE
from training.motion.real_faces import read_clip


def write_clip(frames: Iterable[np.ndarray], out: Path, pcm: np.ndarray | None = None) -> int:
    """RGB frames at 25 fps (H.264, CRF 18) and 48 kHz mono int16 sound (AAC) to `out`; the frame count."""
    container = av.open(str(out), "w")
    video = audio = None
    count = 0
    for rgb in frames:
        if video is None:
            h, w = rgb.shape[:2]
            video = container.add_stream("libx264", rate=FPS, options={"crf": "18", "preset": "veryfast"})
            video.width, video.height, video.pix_fmt = w - w % 2, h - h % 2, "yuv420p"
            if pcm is not None:
                audio = container.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[: video.height, : video.width]), "rgb24")
        container.mux(video.encode(frame))
        count += 1
    if audio is not None and pcm is not None:
        for start in range(0, len(pcm), 1024):
            block = av.AudioFrame.from_ndarray(pcm[None, start:start + 1024], "s16", "mono")
            block.sample_rate = SAMPLE_RATE
            container.mux(audio.encode(block))
        container.mux(audio.encode(None))
    if video is not None:
        container.mux(video.encode(None))
    container.close()
    return count


def join_clips(paths: list[Path], out: Path) -> tuple[int, np.ndarray]:
    """The clips one after another in `out`; the frame count and the joined sound."""
    clips = [read_clip(p) for p in paths]
    pcm = np.concatenate([p for _, p in clips])
    return write_clip((f for frames, _ in clips for f in frames), out, pcm), pcm
