"""AvatarStore: the bundled default avatar plus prepared uploads on disk.

Uploads are checked here (size, type, pixel count from the header alone), then
decoded and analysed by the face mesh in a helper process, so neither a large
image nor the model ever runs on the event loop.
"""

from __future__ import annotations

import asyncio
import io
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from engine.families.portrait.avatar import NoFaceError, cache_path, prepare_upload

from .errors import ApiError

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_PIXELS = 25_000_000
MAX_SIDE = 8192  # a 65535x381 strip is under MAX_PIXELS, yet no portrait
MIN_SIDE = 128
FORMATS = {"PNG", "JPEG", "MPO"}  # MPO: a phone's multi-picture JPEG (its first picture is used)


class AvatarStore:
    """Avatar ids -> prepared portrait paths; at most `limit` uploads are kept."""

    def __init__(self, default: Path, folder: Path, limit: int = 100):
        self.folder, self.limit = folder, limit
        self.paths: dict[str, Path] = {"default": default}
        if folder.is_dir():
            for path in sorted(folder.glob("*.png"), key=lambda p: p.stat().st_mtime)[-limit:]:
                if cache_path(path).exists():
                    self.paths[path.stem] = path
        self._pool: ProcessPoolExecutor | None = None
        # One upload in the helper at a time: one that crashes it fails alone.
        self._turn = asyncio.Lock()

    def path(self, avatar_id: object) -> Path:
        if not isinstance(avatar_id, str) or avatar_id not in self.paths:
            raise ApiError(422, "unknown_avatar", f"no avatar '{avatar_id}'; GET /v1/avatars lists them")
        return self.paths[avatar_id]

    def listing(self) -> list[dict]:
        return [{"avatar_id": a, "default": a == "default"} for a in self.paths]

    async def add(self, data: bytes) -> str:
        check_image_header(data)
        async with self._turn:  # the cap is checked in turn: concurrent uploads cannot overshoot it
            if len(self.paths) - 1 >= self.limit:
                raise ApiError(409, "too_many_avatars", f"{self.limit} avatars are stored (max_avatars); "
                               "DELETE /v1/avatars/{id} one first")
            if self._pool is None:
                self._pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
            loop = asyncio.get_running_loop()
            try:
                avatar_id = await loop.run_in_executor(self._pool, prepare_upload, data, str(self.folder))
            except NoFaceError as exc:
                raise ApiError(422, "no_face", str(exc)) from None
            except BrokenProcessPool:
                self._pool = None
                raise ApiError(422, "bad_image", "the image could not be analysed") from None
            self.paths[avatar_id] = self.folder / f"{avatar_id}.png"
        return avatar_id

    def delete(self, avatar_id: str) -> None:
        """Forget an upload and its files; sessions already using it keep their copy."""
        if avatar_id == "default":
            raise ApiError(403, "default_avatar", "the default avatar cannot be deleted")
        path = self.paths.pop(avatar_id, None)
        if path is None:
            raise ApiError(404, "unknown_avatar", f"no avatar '{avatar_id}'")
        path.unlink(missing_ok=True)
        cache_path(path).unlink(missing_ok=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)


def check_image_header(data: bytes) -> None:
    """Refuse what is not a PNG/JPEG of sensible size, reading only the header."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise ApiError(400, "bad_image", "the upload is empty")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ApiError(413, "image_too_large", f"images are limited to {MAX_UPLOAD_BYTES // 2**20} MB")
    try:
        with Image.open(io.BytesIO(data)) as img:
            kind, (w, h) = img.format, img.size
    except Image.DecompressionBombError:
        raise ApiError(413, "image_too_large", "the image has too many pixels") from None
    except (UnidentifiedImageError, OSError, ValueError):
        raise ApiError(415, "bad_image", "the upload is not a PNG or JPEG image") from None
    if kind not in FORMATS:
        raise ApiError(415, "bad_image", f"{kind} images are not supported; use PNG or JPEG")
    if max(w, h) > 4 * min(w, h):
        raise ApiError(422, "bad_image", f"{w}x{h} is too narrow for a portrait (sides more than 4:1)")
    if max(w, h) > MAX_SIDE:
        raise ApiError(413, "image_too_large", f"{w}x{h}: sides are limited to {MAX_SIDE} pixels")
    if w * h > MAX_PIXELS:
        raise ApiError(413, "image_too_large", f"{w}x{h} is over {MAX_PIXELS // 10**6} megapixels")
    if min(w, h) < MIN_SIDE:
        raise ApiError(422, "image_too_small", f"{w}x{h} is too small; use at least {MIN_SIDE}x{MIN_SIDE}")
