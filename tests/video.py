"""Helpers for the video-avatar tests: a real person's clip, and whether a frame shows them."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from testkit.server import SHARED_DATA
from training.motion.real_faces import read_clip
from training.video.clips import write_clip

CREMA = sorted((SHARED_DATA / "real-talking" / "crema-d").glob("*.flv"))


def person_clip(path: Path, seed: int | None = None) -> Path:
    """10.6 s of one real person talking (five CREMA-D takes joined), as a user would upload
    it; with a seed, one pixel of the first frame differs, so the clip is new to the server."""
    clips = [read_clip(p) for p in CREMA[:5]]
    frames = [f for fs, _ in clips for f in fs]
    if seed is not None:
        frames[0] = frames[0].copy()
        frames[0][:8, :8] = np.random.default_rng(seed).integers(0, 255, (8, 8, 3))
    write_clip(frames, path, np.concatenate([p for _, p in clips]))
    return path


def nearest_clip_frame_error(frame: np.ndarray, clip: Path, crop: np.ndarray) -> float:
    """Mean absolute difference (grey levels, at 64x64) from a frame to the closest frame of
    the clip cut to the avatar's square (x0, y0, side): small only if we see the person."""
    frames, _ = read_clip(clip)
    x0, y0, side = (int(v) for v in crop[:3])
    small = cv2.resize(frame, (64, 64), interpolation=cv2.INTER_AREA).astype(np.float32)
    cuts = [cv2.resize(f[y0:y0 + side, x0:x0 + side], (64, 64), interpolation=cv2.INTER_AREA) for f in frames]
    return min(float(np.abs(c.astype(np.float32) - small).mean()) for c in cuts)


def prepared_crop(folder: Path, avatar_id: str) -> np.ndarray:
    with np.load(folder / f"{avatar_id}.clip.npz") as prepared:
        return prepared["crop"]
