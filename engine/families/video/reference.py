"""A prepared video avatar: the clip's frames in its own framing, and what was learnt of them.

Stored as one `<id>.clip.npz`: the frames as JPEG (a minute at 512x512 is about 50 MB,
not the 1.2 GB of raw pixels), per-frame face landmarks and rig coefficients, and the
walk's jump table. Everything a worker needs to render, nothing it must compute.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path

import cv2
import numpy as np

SUFFIX = ".clip.npz"
FORMAT = 3  # raised whenever the fields or their meaning change: an older file is prepared again,
# not misread. 2: the mouth gain is against the motion stage's published jaw at jaw_gain 0.55;
# 3: ... and with its emphasis (engine/families/motion/emphasis.py)


class StaleReference(ValueError):
    """A file prepared by another version of the format."""


@dataclass(frozen=True)
class VideoReference:
    jpegs: list[bytes]        # frame t of the 25 fps timeline, size x size, JPEG
    landmarks: np.ndarray     # (T, 468, 2) float32, output pixels; every frame has a face
    coeffs: np.ndarray        # (T, motion.DIM) float32: the rig fitted to each frame
    tracked: np.ndarray       # (T,) bool: the tracker saw the face (else its landmarks are a neighbour's)
    scene: np.ndarray         # (T,) int32: which shot of an edited clip each frame is in
    segment: np.ndarray       # (T,) int32: stretches without a cut or a leap of the head (walk.segments)
    jump_to: np.ndarray       # (T, K) int32: frames that frame t may jump to, best first
    jump_cost: np.ndarray     # (T, K) float32: how far (pixels) each jump moves the head
    crop: np.ndarray          # (5,) int: x0, y0, side in the source, then its width, height
    mouth_gain: np.ndarray    # (K,): the motion model's mouth keys scaled to the person's range (adapt.py)
    detail: np.ndarray        # (T,): each frame's mouth sharpness over its shot's median (mouth.sharpness)

    @property
    def frames(self) -> int:
        return len(self.jpegs)

    @cached_property
    def size(self) -> int:
        return int(self.decode(0).shape[0])

    def decode(self, t: int) -> np.ndarray:
        """Frame t as RGB uint8."""
        bgr = cv2.imdecode(np.frombuffer(self.jpegs[t], np.uint8), cv2.IMREAD_COLOR)
        assert bgr is not None, "frames are written by encode_jpeg"
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def save(self, path: Path) -> None:
        """Written under a temporary name and moved: a reader never sees half a file."""
        lengths = np.array([len(j) for j in self.jpegs], np.int64)
        arrays = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "jpegs"}
        partial = path.with_name(path.name + ".part.npz")
        np.savez(partial, jpeg=np.frombuffer(b"".join(self.jpegs), np.uint8), lengths=lengths,
                 format=np.array(FORMAT), **arrays)
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> VideoReference:
        check_format(path)
        with np.load(path) as d:
            blob, ends = d["jpeg"].tobytes(), np.cumsum(d["lengths"])
            jpegs = [blob[a:b] for a, b in zip(np.concatenate([[0], ends[:-1]]), ends)]
            return cls(jpegs, **{f.name: d[f.name] for f in fields(cls) if f.name != "jpegs"})


def is_video_avatar(path: Path) -> bool:
    """A prepared video avatar's file (else a prepared portrait)."""
    return path.name.endswith(SUFFIX)


def is_current(path: Path) -> bool:
    """Whether this version can read the file (see check_format)."""
    try:
        check_format(path)
        return True
    except StaleReference:
        return False


def check_format(path: Path) -> None:
    """Raise StaleReference unless the file is of this FORMAT (reads one small member)."""
    try:
        with np.load(path) as d:
            found = int(d["format"]) if "format" in d.files else 0
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise StaleReference(f"{path.name} cannot be read ({exc})") from None
    if found != FORMAT:
        raise StaleReference(f"{path.name} was prepared by another version (format {found}, not {FORMAT}); "
                             "upload the clip again")


def encode_jpeg(rgb: np.ndarray, quality: int = 92) -> bytes:
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return data.tobytes()
