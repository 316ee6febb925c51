"""A portrait's scene: the photo around its square face crop, for streams wider than the crop.

The families draw a square head (the prepared portrait). A 1280x720 stream shows that head
where it was in the photo, with the photo's own surroundings beside it: at upload the
surroundings (SCENE_MARGIN crop sides each way, as far as the photo reaches) are kept beside
the portrait as `<id>.scene.npz` (a JPEG and the crop's box in it). A portrait without one
(the bundled default, uploads from before) is its own scene. Where a frame reaches past the
photo, the photo's edge is stretched outwards and blurred: out-of-focus background, no seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

SCENE_MARGIN = 0.75  # crop sides kept each way: 16:9 and 9:16 frames need 0.39, 21:9 0.67
MAX_CROP_SIDE = 1080  # the crop's side in the kept scene, at most (a 1080p frame's height)
BLUR = 0.02  # sigma of the blur past the photo's edge, in frame widths
JPEG_QUALITY = 90


@dataclass(frozen=True)
class Box:
    """A square in an image: its top-left corner and side, in pixels."""

    x: float
    y: float
    side: float


@dataclass(frozen=True)
class Scene:
    """The photo around the crop (RGB) and where the crop sits in it."""

    image: np.ndarray
    crop: Box

    @classmethod
    def of_portrait(cls, portrait: np.ndarray) -> Scene:
        return cls(portrait, Box(0.0, 0.0, float(portrait.shape[0])))


def scene_path(portrait: Path) -> Path:
    return portrait.with_suffix(".scene.npz")


def save_scene(path: Path, photo: np.ndarray, crop: Box) -> None:
    """Keep the photo's surroundings of `crop` (RGB photo, crop in its pixels) at `path`."""
    m = SCENE_MARGIN * crop.side
    x0, y0 = max(int(crop.x - m), 0), max(int(crop.y - m), 0)
    x1, y1 = (int(np.ceil(v + crop.side + m)) for v in (crop.x, crop.y))
    region = photo[y0:y1, x0:x1]  # numpy stops at the photo's edge
    k = min(1.0, MAX_CROP_SIDE / crop.side)
    if k < 1:
        region = cv2.resize(region, (max(round(region.shape[1] * k), 1), max(round(region.shape[0] * k), 1)),
                            interpolation=cv2.INTER_AREA)
    ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(region, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise ValueError("the photo's surroundings could not be encoded")
    box = np.array([(crop.x - x0) * k, (crop.y - y0) * k, crop.side * k], np.float64)
    tmp = path.with_suffix(".part.npz")  # a reader never sees half a file
    np.savez(tmp, jpeg=jpeg, box=box)
    tmp.replace(path)


def load_scene(portrait_path: Path, portrait: np.ndarray) -> Scene:
    """The scene kept beside a prepared portrait, or the portrait itself when none was."""
    path = scene_path(portrait_path)
    if not path.exists():
        return Scene.of_portrait(portrait)
    with np.load(path) as d:
        bgr = cv2.imdecode(d["jpeg"], cv2.IMREAD_COLOR)
        x, y, side = (float(v) for v in d["box"])
    if bgr is None:
        raise ValueError(f"{path.name} is damaged; upload the photo again")
    return Scene(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), Box(x, y, side))


def frame_view(scene: Scene, width: int, height: int) -> tuple[float, float, float]:
    """The part of the scene a width x height frame shows, as its top-left corner and height:
    the crop fills the frame's shorter side, centred across the longer one, and kept inside the
    photo where the photo allows."""
    c, aspect = scene.crop, width / height
    w, h = (c.side * aspect, c.side) if aspect >= 1 else (c.side, c.side / aspect)
    x, y = c.x + c.side / 2 - w / 2, c.y + c.side / 2 - h / 2
    ih, iw = scene.image.shape[:2]
    x = min(max(x, 0.0), iw - w) if iw >= w else x
    y = min(max(y, 0.0), ih - h) if ih >= h else y
    return x, y, h


def canvas(scene: Scene, width: int, height: int) -> tuple[np.ndarray, tuple[int, int, int]]:
    """The still frame (height, width, 3) RGB around the head, and where the head goes in it:
    (x, y, side) in frame pixels, x and y even, side even."""
    vx, vy, vh = frame_view(scene, width, height)
    img, k = scene.image, height / vh
    scale = k
    if k < 1:  # shrink first: a linear warp alone aliases a large photo
        img = cv2.resize(img, (max(round(img.shape[1] * k), 1), max(round(img.shape[0] * k), 1)),
                         interpolation=cv2.INTER_AREA)
        scale = 1.0
    to_frame = np.array([[scale, 0, -vx * k], [0, scale, -vy * k]], np.float32)
    frame = cv2.warpAffine(img, to_frame, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    inside = cv2.warpAffine(np.ones(img.shape[:2], np.float32), to_frame, (width, height), flags=cv2.INTER_LINEAR,
                            borderValue=0)
    if inside.min() < 0.999:
        sigma = BLUR * width
        blurred = cv2.GaussianBlur(frame, (0, 0), sigma)
        # sharp well inside the photo, blurred from its edge on: no line where the photo ends
        soft = np.clip(2 * cv2.GaussianBlur(inside, (0, 0), sigma) - 1, 0, 1)[..., None]
        frame = (soft * frame + (1 - soft) * blurred).astype(np.uint8)
    c = scene.crop
    side = min(_even(c.side * k), width, height)  # width and height are even (I420)
    x = min(max(_even((c.x - vx) * k), 0), width - side)
    y = min(max(_even((c.y - vy) * k), 0), height - side)
    return frame, (x, y, side)


def _even(v: float) -> int:
    return int(round(v / 2)) * 2
