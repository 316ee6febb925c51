"""Reference portraits: loading, the one-time face analysis, and its cache.

A portrait is analysed once (mediapipe face mesh, 478 points); the landmarks are
cached beside the image as `<name>.landmarks.npy` so later sessions start at once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from engine.families.portrait.scene import Box, save_scene, scene_path
from engine.package_files import package_path

ASSETS = package_path("engine", "assets")
DEFAULT_AVATAR = ASSETS / "default.png"


class NoFaceError(ValueError):
    """The image holds no face the renderer can animate."""


@dataclass(frozen=True)
class Portrait:
    """A square RGB reference image and its face landmarks (pixel coordinates)."""

    image: np.ndarray  # (S, S, 3) uint8 RGB
    landmarks: np.ndarray  # (478, 2) float32, x then y

    @property
    def size(self) -> int:
        return self.image.shape[0]


def detect_landmarks(image: np.ndarray) -> np.ndarray:
    """Run the face mesh once on an RGB image; raise NoFaceError when there is none."""
    import mediapipe as mp  # heavy import, only needed for portraits not yet analysed

    with mp.solutions.face_mesh.FaceMesh(
        static_image_mode=True, refine_landmarks=True, max_num_faces=1, min_detection_confidence=0.5
    ) as mesh:
        result = mesh.process(np.ascontiguousarray(image))
    if not result.multi_face_landmarks:
        raise NoFaceError("no face was found in the image; use a clear, front-facing portrait")
    h, w = image.shape[:2]
    points = [(p.x * w, p.y * h) for p in result.multi_face_landmarks[0].landmark]
    return np.asarray(points, np.float32)


def face_box(image: np.ndarray, landmarks: np.ndarray) -> Box:
    """The square around the face (head and shoulders) that a portrait is cut to."""
    lo, hi = landmarks.min(0), landmarks.max(0)
    face_h = float(hi[1] - lo[1])
    side = int(round(min(2.3 * face_h, *image.shape[:2])))
    cx, cy = (lo + hi) / 2
    x0 = int(np.clip(round(cx - side / 2), 0, image.shape[1] - side))
    y0 = int(np.clip(round(cy - side * 0.45), 0, image.shape[0] - side))
    return Box(x0, y0, side)


def crop_to_face(image: np.ndarray, landmarks: np.ndarray, size: int) -> np.ndarray:
    """A square crop around the face (face_box), resized to size x size."""
    box = face_box(image, landmarks)
    x0, y0, side = int(box.x), int(box.y), int(box.side)
    crop = image[y0 : y0 + side, x0 : x0 + side]
    return cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA)


def prepare_portrait(image: np.ndarray, size: int = 512) -> Portrait:
    """Crop any RGB photo to the face, resize, and analyse it."""
    return _prepared(image, size)[0]


def _prepared(image: np.ndarray, size: int) -> tuple[Portrait, Box]:
    if image.ndim != 3 or image.shape[2] != 3:
        raise NoFaceError("the image must be a colour photo")
    landmarks = detect_landmarks(image)
    cropped = crop_to_face(image, landmarks, size)
    face_w = np.ptp(detect_landmarks(cropped)[:, 0])
    if face_w < size * 0.15:
        raise NoFaceError("the face is too small in this image; use a closer portrait")
    return Portrait(cropped, detect_landmarks(cropped)), face_box(image, landmarks)


def cache_path(image_path: Path) -> Path:
    return image_path.with_suffix(".landmarks.npy")


def load_portrait(path: Path, size: int = 512) -> Portrait:
    """Load an already prepared portrait, analysing it once if it has no cached landmarks."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise NoFaceError(f"cannot read image {path.name}")
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    if rgb.shape[:2] != (size, size):
        rgb = cv2.resize(rgb, (size, size), interpolation=cv2.INTER_AREA)
    cached = cache_path(path)
    if cached.exists():
        landmarks = np.load(cached)
    else:
        landmarks = detect_landmarks(rgb)
        np.save(cached, landmarks)
    return Portrait(rgb, landmarks.astype(np.float32))


def default_source() -> np.ndarray:
    """The public-domain astronaut photo that the bundled default avatar is cut from."""
    import skimage.data

    return skimage.data.astronaut()  # type: ignore[no-untyped-call]  # skimage leaves it unannotated


def image_digest(image: np.ndarray) -> str:
    return hashlib.sha256(image.tobytes()).hexdigest()[:16]


def decode_image(data: bytes) -> np.ndarray:
    """PNG/JPEG bytes -> RGB array (EXIF rotation applied); NoFaceError if not an image."""
    import io

    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as opened:
            img = ImageOps.exif_transpose(opened)
            if img.mode.startswith("I"):  # 16-bit grey: convert("RGB") would clip it to white
                grey = np.asarray(img, np.float64)
                return np.repeat((grey / max(grey.max(), 1) * 255).astype(np.uint8)[..., None], 3, axis=2)
            return np.asarray(img.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise NoFaceError(f"the file is not a readable PNG or JPEG image ({exc})") from None


def save_prepared(portrait: Portrait, folder: Path, avatar_id: str | None = None) -> str:
    """Write a prepared portrait and its landmarks as `avatar_id` (default: a digest of the image)."""
    avatar_id = avatar_id or image_digest(portrait.image)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{avatar_id}.png"
    cv2.imwrite(str(path), cv2.cvtColor(portrait.image, cv2.COLOR_RGB2BGR))
    np.save(cache_path(path), portrait.landmarks)
    return avatar_id


def prepare_upload(data: bytes, folder: str, avatar_id: str | None = None) -> str:
    """Decode, crop, analyse and store an uploaded photo as `avatar_id` (default: a digest),
    and its surroundings for wide streams (scene.py); runs in a helper process."""
    photo = decode_image(data)
    portrait, box = _prepared(photo, 512)
    avatar_id = save_prepared(portrait, Path(folder), avatar_id)
    save_scene(scene_path(Path(folder) / f"{avatar_id}.png"), photo, box)
    return avatar_id
