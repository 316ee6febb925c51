"""Joining real clips into one upload, as a user would film a longer take."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from engine.config import FPS, SAMPLE_RATE
from training.motion.real_faces import read_clip


def join_clips(paths: list[Path], out: Path) -> tuple[int, np.ndarray]:
    """Write the clips one after another to `out` (H.264 + AAC, 25 fps); return the frame
    count and the joined 48 kHz mono audio."""
    container = av.open(str(out), "w")
    video = audio = None
    frames_done, pcm_all = 0, []
    for path in paths:
        frames, pcm = read_clip(path)
        if video is None:
            h, w = frames[0].shape[:2]
            video = container.add_stream("libx264", rate=FPS, options={"crf": "18", "preset": "veryfast"})
            video.width, video.height, video.pix_fmt = w - w % 2, h - h % 2, "yuv420p"
            audio = container.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        for rgb in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[: video.height, : video.width]), "rgb24")
            container.mux(video.encode(frame))
        pcm_all.append(pcm)
        frames_done += len(frames)
    pcm = np.concatenate(pcm_all)
    for start in range(0, len(pcm), 1024):
        block = av.AudioFrame.from_ndarray(pcm[None, start:start + 1024], "s16", "mono")
        block.sample_rate = SAMPLE_RATE
        container.mux(audio.encode(block))
    container.mux(video.encode(None))
    container.mux(audio.encode(None))
    container.close()
    return frames_done, pcm
