"""Reference encoding, once per video avatar: a clip in, a VideoReference out.

Two passes over the clip, because its frames are never all held at once: the first
tracks the face on every frame (at most 640 pixels wide, which is plenty for the mesh)
and checks it is one frontal face big enough to animate; the second cuts every frame to
the square the face moves in over the whole clip, so the avatar keeps the clip's own
framing and head motion. Then the rig is fitted to every frame and the walk's jump
table built. `progress(share, stage)` is called as it goes. The helper process that runs
it for the server is engine/runtime/prepare.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from engine.families.portrait.rig_fit import fill_gaps, fit_clip
from engine.families.video.adapt import Drive, mouth_gain
from engine.families.video.clip import ClipError, ClipInfo, frames, probe, sound
from engine.families.video.clip import samples as clip_samples
from engine.families.video.mouth import sharpness, turn
from engine.families.video.reference import SUFFIX, VideoReference, encode_jpeg, is_current
from engine.families.video.tracking import POINTS, FaceCounter, FaceTracker
from engine.families.video.walk import jump_table, segments

ANALYSIS_WIDTH = 640
MIN_TRACKED = 0.9  # share of frames that must show the face
MIN_FACE_PX = 80  # face height (forehead to chin) in the source
MAX_TURN = 0.22  # median nose offset from the cheeks' midpoint, in face widths (about 35 degrees)
SECOND_SHARE = 0.2  # two faces in this share of the checked frames means two people
COUNT_EVERY = 12  # frames between face counts (the detector costs as much as the mesh)
SCENE_CUT = 0.3  # share of the colour histogram that moves between two frames at a cut
FRAMING = 2.3  # the crop's side in face heights, as for photos (head and shoulders)

Progress = Callable[[float, str], None]


def clip_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def prepare_clip(path: Path, folder: Path, drive: Drive, size: int = 512, progress: Progress | None = None,
                 avatar_id: str | None = None) -> str:
    """Prepare the clip at `path` into `folder/<id>.clip.npz` and return the id: `avatar_id`,
    or a digest of the file, so a clip prepared before is found and not redone. `drive`
    makes the motion model's track of the clip's sound (engine.assembly.model_motion)."""
    report = progress or (lambda share, stage: None)
    avatar_id = avatar_id or clip_digest(path)
    target = folder / f"{avatar_id}{SUFFIX}"
    if target.exists() and is_current(target):  # another version's file, or a damaged one, is redone
        report(1.0, "ready")
        return avatar_id
    info = probe(path)
    landmarks, tracked, scene = track(path, info, lambda s: report(0.05 + 0.45 * s, "tracking the face"))
    crop = framing(landmarks[tracked], info)
    x0, y0, side = crop
    out_lm = ((landmarks - (x0, y0)) * (size / side)).astype(np.float32)
    jpegs, sharp = cut(path, crop, size, out_lm, info, lambda s: report(0.5 + 0.4 * s, "cutting frames"))
    n = min(len(jpegs), len(landmarks))
    out_lm = out_lm[:n]
    report(0.92, "fitting the face")
    coeffs = fit_clip(out_lm)
    segment = segments(out_lm, scene[:n])
    jump_to, jump_cost = jump_table(out_lm, coeffs, scene[:n], segment)
    report(0.95, "learning the mouth")
    gain = mouth_gain(sound(path), coeffs, drive)
    folder.mkdir(parents=True, exist_ok=True)
    VideoReference(jpegs[:n], out_lm, coeffs, tracked[:n], scene[:n], segment, jump_to, jump_cost,
                   np.array([x0, y0, side, info.width, info.height]), gain, detail(sharp[:n], scene[:n])).save(target)
    report(1.0, "ready")
    return avatar_id


def track(path: Path, info: ClipInfo, progress: Callable[[float], None]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(T, 468, 2) source-pixel landmarks (gaps filled from neighbours), which frames had a
    face, and the shot each frame is in. The tracker starts afresh at each cut: left to
    itself it would carry the last shot's face into the first frames of the next."""
    scale = min(1.0, ANALYSIS_WIDTH / info.width)
    small = (round(info.width * scale), round(info.height * scale))
    found, counts, cuts = [], [], SceneCuts()
    counter, tracker = FaceCounter(), FaceTracker()
    try:
        for i, rgb in enumerate(frames(path, lambda f: cv2.resize(f, small, interpolation=cv2.INTER_AREA)
                                       if scale < 1 else f)):
            if cuts(rgb):
                tracker.close()
                tracker = FaceTracker()
            faces = tracker(rgb)
            found.append(faces[0] / scale if faces else np.full((POINTS, 2), np.nan, np.float32))
            if i % COUNT_EVERY == 0:
                counts.append(len(counter(rgb)))
                progress(min(1.0, i / max(info.frames, 1)))
    finally:
        counter.close()
        tracker.close()
    lm = np.stack(found) if found else np.zeros((0, POINTS, 2), np.float32)
    tracked = np.isfinite(lm[:, 0, 0])
    check_face(lm[tracked], tracked, float(np.mean(np.array(counts) > 1)) if counts else 0.0)
    return fill_gaps(lm).astype(np.float32), tracked, np.array(cuts.scene, np.int32)


class SceneCuts:
    """Numbers the shots of an edited clip. A cut is where the picture's colours change at
    once (histograms: a head that moves or a take joined to the next in the same room
    barely changes them, a new camera set-up does)."""

    def __init__(self) -> None:
        self.scene: list[int] = []
        self._last: np.ndarray | None = None

    def __call__(self, rgb: np.ndarray) -> bool:
        bins = (rgb[::4, ::4] // 32).reshape(-1, 3).astype(np.int32) @ np.array([64, 8, 1])
        hist = np.bincount(bins, minlength=512) / len(bins)
        cut = self._last is not None and 0.5 * float(np.abs(hist - self._last).sum()) > SCENE_CUT
        self._last = hist
        self.scene.append((self.scene[-1] if self.scene else 0) + cut)
        return cut


def check_face(lm: np.ndarray, tracked: np.ndarray, several: float) -> None:
    """Refuse a clip that is not one frontal face, big enough, in nearly every frame."""
    if not tracked.any():
        raise ClipError("no_face", "no face was found in the clip; film the person from the front, face in view")
    if tracked.mean() < MIN_TRACKED:
        raise ClipError("no_face", f"a face is visible in only {tracked.mean():.0%} of the clip; keep the face "
                        "in view the whole time")
    if several >= SECOND_SHARE:
        raise ClipError("several_faces", "the clip shows more than one face; use a clip of one person alone")
    height = float(np.median(np.linalg.norm(lm[:, 152] - lm[:, 10], axis=-1)))
    if height < MIN_FACE_PX:
        raise ClipError("face_too_small", _too_small(height))
    turned = float(np.median(np.abs(turn(lm))))
    if turned > MAX_TURN:
        raise ClipError("face_turned", "the face is turned away from the camera; film the person from the front")


def framing(lm: np.ndarray, info: ClipInfo) -> tuple[int, int, int]:
    """The square (x0, y0, side) in source pixels that holds head and shoulders over the clip."""
    height = float(np.median(np.linalg.norm(lm[:, 152] - lm[:, 10], axis=-1)))
    side = int(min(FRAMING * height, info.width, info.height))
    centre = np.median((lm.min(1) + lm.max(1)) / 2, axis=0)
    x0 = int(np.clip(round(centre[0] - side / 2), 0, info.width - side))
    y0 = int(np.clip(round(centre[1] - side * 0.45), 0, info.height - side))
    return x0, y0, side


def cut(path: Path, crop: tuple[int, int, int], size: int, landmarks: np.ndarray, info: ClipInfo,
        progress: Callable[[float], None]) -> tuple[list[bytes], np.ndarray]:
    """Every frame cut to the crop, as JPEG, and the sharpness of its mouth."""
    out, sharp = [], []
    for i, rgb in enumerate(frames(path, lambda f: crop_square(f, crop, size))):
        if i >= len(landmarks):
            break
        out.append(encode_jpeg(rgb))
        sharp.append(sharpness(rgb, landmarks[i]))
        if i % 25 == 0:
            progress(min(1.0, i / max(info.frames, 1)))
    return out, np.array(sharp, np.float32)


def crop_square(rgb: np.ndarray, crop: tuple[int, int, int] | np.ndarray, size: int) -> np.ndarray:
    """A frame cut to the avatar's square (x0, y0, side in source pixels) at size x size."""
    x0, y0, side = (int(v) for v in crop[:3])
    return cv2.resize(rgb[y0:y0 + side, x0:x0 + side], (size, size),
                      interpolation=cv2.INTER_AREA if side > size else cv2.INTER_CUBIC)


def detail(sharp: np.ndarray, scene: np.ndarray) -> np.ndarray:
    """Each frame's mouth sharpness over the median of its shot's (shots differ in zoom and focus)."""
    out = np.ones(len(sharp), np.float32)
    for shot in np.unique(scene):
        mine = scene == shot
        out[mine] = sharp[mine] / max(float(np.median(sharp[mine])), 1e-6)
    return out


def quick_check(path: Path, samples: int = 6) -> ClipInfo:
    """What can be told in a second or two: the stream, its length, and a face in a few
    frames spread over the clip, reached by seeking (the full check runs with the tracking)."""
    info = probe(path)
    scale = min(1.0, ANALYSIS_WIDTH / info.width)
    small = (round(info.width * scale), round(info.height * scale))
    times = np.linspace(0, info.seconds * 0.95, samples).tolist()
    found, detected, several = [], [], []
    counter = FaceCounter()
    try:
        for rgb in clip_samples(path, times):
            small_rgb = cv2.resize(rgb, small, interpolation=cv2.INTER_AREA)
            with FaceTracker() as tracker:  # a fresh one per sample: each is a still
                faces = [f / scale for f in tracker(small_rgb)]
                if not faces and scale < 1:  # a face too small for the analysis size: is it there?
                    faces = tracker(rgb)
            found.append(faces[0] if faces else np.full((POINTS, 2), np.nan, np.float32))
            whole = [h / scale for h in counter(small_rgb)]
            several.append(len(whole) > 1)  # (tiles overlap: a face in two is not two faces)
            detected.append(whole or (counter.tiled(rgb) if not faces else []))
    finally:
        counter.close()
    if not found:
        raise ClipError("unreadable", "no frame of the video could be decoded")
    lm = np.stack(found)
    tracked = np.isfinite(lm[:, 0, 0])
    seen = [d for d in detected if d]
    if tracked.mean() < 0.5 and len(seen) >= len(detected) / 2:  # the detector sees what the mesh cannot
        height = float(np.median([d[0] for d in seen]))
        if height < 2 * MIN_FACE_PX:
            raise ClipError("face_too_small", _too_small(height))
    # a sampled frame without a face is not yet a refusal (a blink of a turn); most are
    check_face(lm[tracked], tracked | (tracked.mean() >= 0.5), float(np.mean(several)))
    return info


def _too_small(height: float) -> str:
    return (f"the face is only {height:.0f} pixels tall; film closer (at least {MIN_FACE_PX} pixels from "
            "forehead to chin)")
