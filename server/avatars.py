"""AvatarStore: the bundled default avatar plus prepared uploads on disk.

Photo uploads are checked here (size, type, pixel count from the header alone), then
decoded and analysed by the face mesh in a helper process, so neither a large image
nor the model ever runs on the event loop. Video uploads arrive on disk (they can be
200 MB) and are prepared by their own helper process (video_avatars.py); a prepared
avatar of either kind is a file in the folder, so it survives a restart.

Every upload gets its own id, even of a file uploaded before: whoever deletes their
avatar deletes no one else's. A clip already prepared is not prepared again: its
prepared file is linked under the new id.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import secrets
import shutil
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from engine.facade import (
    CLIP_SUFFIX,
    NoFaceError,
    StaleReference,
    cache_path,
    check_format,
    is_video_avatar,
    prepare_upload,
    scene_path,
)
from server import video_avatars
from server.errors import ApiError
from server.helper_process import HelperProcess
from server.video_avatars import Preparation

log = logging.getLogger("server.avatars")
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_PIXELS = 25_000_000
MAX_SIDE = 8192  # a 65535x381 strip is under MAX_PIXELS, yet no portrait
MIN_SIDE = 128
MAX_VIDEO_BYTES = 200 * 1024 * 1024
MAX_PREPARING = 2  # clips prepared at once (each takes a core); more wait for a 429's Retry-After
MAX_RECEIVING = 3  # clip uploads written to disk at once (each up to MAX_VIDEO_BYTES)
POOL_IDLE_S = 10.0  # the photo helper ends this long after its last photo (it starts again in 2-3 s)
FAILED_KEPT = 50  # failed preparations remembered for GET
UPLOAD_SUFFIX = ".upload"
FORMATS = {"PNG", "JPEG", "MPO"}  # MPO: a phone's multi-picture JPEG (its first picture is used)


class AvatarStore:
    """Avatar ids -> prepared avatar files (a portrait .png or a video .clip.npz); at most
    `limit` uploads are kept."""

    def __init__(self, default: Path, folder: Path, limit: int = 100, size: int = 512):
        self.folder, self.limit, self.size = folder, limit, size
        self.paths: dict[str, Path] = {"default": default}
        self.preparing: dict[str, Preparation] = {}  # and failed ones, until FAILED_KEPT newer
        if folder.is_dir():
            for stale in [*folder.glob(f"*{UPLOAD_SUFFIX}"), *folder.glob("*.part.npz")]:
                stale.unlink(missing_ok=True)  # a restart while uploading or preparing
            photos = [p for p in folder.glob("*.png") if cache_path(p).exists()]
            clips = [p for p in folder.glob(f"*{CLIP_SUFFIX}") if _current(p)]
            for path in sorted(photos + clips, key=lambda p: p.stat().st_mtime)[-limit:]:
                self.paths[path.name.split(".")[0]] = path
        self._helper = HelperProcess(POOL_IDLE_S)  # a server that is not taking photos holds none
        # One upload in the helper at a time: one that crashes it fails alone.
        self._turn = asyncio.Lock()
        self._receiving = 0  # clips being written to disk now
        self._settling: set[asyncio.Task] = set()  # held: the loop keeps only weak references
        self._prepared: dict[str, list[str]] = {}  # a clip's digest -> the ready video avatars made from it

    def path(self, avatar_id: object) -> Path:
        if isinstance(avatar_id, str) and avatar_id in self.preparing:
            prep = self.preparing[avatar_id]
            raise ApiError(409, "avatar_not_ready", f"avatar '{avatar_id}' is {prep.status}"
                           + (f": {prep.reason}" if prep.reason else f" ({prep.progress:.0%})"))
        if not isinstance(avatar_id, str) or avatar_id not in self.paths:
            raise ApiError(422, "unknown_avatar", f"no avatar '{avatar_id}'; GET /v1/avatars lists them")
        return self.paths[avatar_id]

    def describe(self, avatar_id: str) -> dict:
        if avatar_id in self.preparing:
            return self.preparing[avatar_id].describe()
        if avatar_id not in self.paths:
            raise ApiError(404, "unknown_avatar", f"no avatar '{avatar_id}'")
        kind = "video" if is_video_avatar(self.paths[avatar_id]) else "photo"
        return {"avatar_id": avatar_id, "kind": kind, "status": "ready", "default": avatar_id == "default"}

    def listing(self) -> list[dict]:
        return [self.describe(a) for a in [*self.paths, *self.preparing]]

    def _check_room(self) -> None:
        stored = len(self.paths) - 1 + sum(p.status == "preparing" for p in self.preparing.values())
        if stored >= self.limit:
            raise ApiError(409, "too_many_avatars", f"{self.limit} avatars are stored (max_avatars); "
                           "DELETE /v1/avatars/{id} one first")

    @staticmethod
    def new_id() -> str:
        return secrets.token_hex(8)

    async def add(self, data: bytes) -> str:
        check_image_header(data)
        async with self._turn:  # the cap is checked in turn: concurrent uploads cannot overshoot it
            self._check_room()
            try:
                avatar_id = await self._analyse(data)
            except NoFaceError as exc:
                raise ApiError(422, "no_face", str(exc)) from None
            except BrokenProcessPool:
                raise ApiError(422, "bad_image", "the image could not be analysed") from None
            self.paths[avatar_id] = self.folder / f"{avatar_id}.png"
        return avatar_id

    async def _analyse(self, data: bytes) -> str:
        """The photo prepared by the helper process."""
        return await self._helper.run(prepare_upload, data, str(self.folder), self.new_id())

    @contextlib.contextmanager
    def receiving(self) -> Iterator[None]:
        """A clip upload in flight: at most MAX_RECEIVING at once, so uploads cannot fill the disk."""
        if self._receiving >= MAX_RECEIVING:
            raise ApiError(429, "busy_uploading", f"{MAX_RECEIVING} clips are being uploaded; try again shortly",
                           {"Retry-After": "30"})
        self._receiving += 1
        try:
            yield
        finally:
            self._receiving -= 1

    def upload_path(self, token: str) -> Path:
        """Where an arriving clip is written (removed by a restart if left behind)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder / f"{token}{UPLOAD_SUFFIX}"

    async def add_video(self, clip: Path, digest: str) -> dict:
        """Start preparing an uploaded clip (already on disk, named by upload_path) as a new
        avatar; 422 if the quick check refuses it. The check runs outside the store's turn:
        photo uploads do not wait behind a slow clip."""
        avatar_id = self.new_id()
        async with self._turn:  # the cap is checked in turn: concurrent uploads cannot overshoot it
            self._check_room()
            if same := self._prepared.get(digest):  # any of them: each holds its own file
                clip.unlink(missing_ok=True)
                self.paths[avatar_id] = await _own_copy(self.paths[same[0]], self.folder / f"{avatar_id}{CLIP_SUFFIX}")
                same.append(avatar_id)
                return self.describe(avatar_id)
            if sum(p.status == "preparing" for p in self.preparing.values()) >= MAX_PREPARING:
                clip.unlink(missing_ok=True)
                raise ApiError(429, "busy_preparing", f"{MAX_PREPARING} clips are being prepared; try again "
                               "when one is ready", {"Retry-After": "30"})
            prep = self.preparing[avatar_id] = Preparation(avatar_id, clip)  # holds its place while checked
        try:
            await video_avatars.start(prep, self.folder, self.size)  # on a 422 it has removed the clip
        except BaseException:
            if self.preparing.get(avatar_id) is prep:
                del self.preparing[avatar_id]
            raise
        task = asyncio.get_running_loop().create_task(self._settle(prep, digest))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        return prep.describe()

    async def _settle(self, prep: Preparation, digest: str) -> None:
        """Once a preparation ends: a ready avatar joins the store, a failed one is remembered."""
        await prep.done.wait()
        path = self.folder / f"{prep.avatar_id}{CLIP_SUFFIX}"
        if prep.status == "ready" and path.exists() and self.preparing.get(prep.avatar_id) is prep:
            self.paths[prep.avatar_id] = path
            self._prepared.setdefault(digest, []).append(prep.avatar_id)
            del self.preparing[prep.avatar_id]
        failed = [a for a, p in self.preparing.items() if p.status == "failed"]
        for old in failed[:-FAILED_KEPT]:
            del self.preparing[old]

    async def delete(self, avatar_id: str) -> None:
        """Forget an upload and its files (stopping its preparation); sessions already using
        it keep their copy."""
        if avatar_id == "default":
            raise ApiError(403, "default_avatar", "the default avatar cannot be deleted")
        prep = self.preparing.pop(avatar_id, None)
        if prep is not None:
            await video_avatars.stop(prep)
            (self.folder / f"{avatar_id}{CLIP_SUFFIX}.part.npz").unlink(missing_ok=True)
            (self.folder / f"{avatar_id}{CLIP_SUFFIX}").unlink(missing_ok=True)
            return
        path = self.paths.pop(avatar_id, None)
        if path is None:
            raise ApiError(404, "unknown_avatar", f"no avatar '{avatar_id}'")
        for file in (path, cache_path(path), scene_path(path)):
            file.unlink(missing_ok=True)
        for digest, ids in list(self._prepared.items()):
            if avatar_id in ids:
                ids.remove(avatar_id)
                if not ids:
                    del self._prepared[digest]

    async def close(self) -> None:
        await asyncio.gather(*(video_avatars.stop(p) for p in self.preparing.values()), return_exceptions=True)
        self._helper.close()


async def _own_copy(source: Path, target: Path) -> Path:
    """A prepared file under another name: a hard link (instant), or a copy where links fail."""
    try:
        os.link(source, target)
    except OSError:
        await asyncio.to_thread(shutil.copyfile, source, target)
    return target


def _current(path: Path) -> bool:
    """A prepared clip this version can read; an older one is removed (its clip must be uploaded again)."""
    try:
        check_format(path)
        return True
    except StaleReference as exc:
        log.warning("removing video avatar %s: %s", path.name, exc)
        path.unlink(missing_ok=True)
        return False


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
