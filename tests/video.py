"""Helpers for the video-avatar tests: a real person's clip, and whether a frame shows them."""

from __future__ import annotations

import functools
from pathlib import Path

import cv2
import numpy as np

from engine.families.video.prepare import crop_square
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
    small = cv2.resize(frame, (64, 64), interpolation=cv2.INTER_AREA).astype(np.float32)
    return min(float(np.abs(c - small).mean()) for c in _cuts(clip, tuple(int(v) for v in crop[:3])))


@functools.lru_cache(maxsize=4)
def _cuts(clip: Path, crop: tuple[int, int, int]) -> list[np.ndarray]:
    """The clip's frames cut as the avatar was, at 64x64 (read once per clip and crop)."""
    return [crop_square(f, crop, 64).astype(np.float32) for f in read_clip(clip)[0]]


def prepared_crop(folder: Path, avatar_id: str) -> np.ndarray:
    with np.load(folder / f"{avatar_id}.clip.npz") as prepared:
        return prepared["crop"]
