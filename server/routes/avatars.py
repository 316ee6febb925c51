"""Routes of the avatar store: list, upload (a photo, multipart or raw; or a video clip), status, delete."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from pathlib import Path

from aiohttp import BodyPartReader, web

from engine.facade import CLIP_UPLOAD_SUFFIXES as CLIP_SUFFIXES
from server.avatars import MAX_UPLOAD_BYTES, MAX_VIDEO_BYTES
from server.config import PHOTOS_ONLY
from server.errors import BODY_IDLE_S, ApiError, read_body
from server.server import SERVER

routes = web.RouteTableDef()
VIDEO_TYPES = ("video/", "application/octet-stream")
VIDEO_TIMEOUT_S = 900.0  # 200 MB at 2 Mbit/s takes 800 s; a stalled upload is cut by BODY_IDLE_S


@routes.get("/v1/avatars")
async def avatars_list(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    return web.json_response(server.avatars.listing())


@routes.get("/v1/avatars/{id}")
async def avatars_get(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    return web.json_response(server.avatars.describe(request.match_info["id"]))


@routes.post("/v1/avatars")
async def avatars_add(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    if request.content_type.startswith("multipart/"):
        part = await _first_file_part(request)
        if _is_video(part):
            if server.config.photos_only:
                raise ApiError(422, "unsupported_avatar", PHOTOS_ONLY)
            with server.avatars.receiving():  # arriving or being checked: on disk, and not yet counted
                clip, digest = await _save_video(part, server.avatars.upload_path(secrets.token_hex(8)))
                described = await server.avatars.add_video(clip, digest)
            return web.json_response(described, status=200 if described["status"] == "ready" else 202)
        data = await _read_image(part)
    elif request.content_type == "application/x-www-form-urlencoded":  # an HTML form without enctype
        raise ApiError(400, "bad_upload", "a form's fields but no file: send the file as multipart/form-data "
                       "(field 'image' or 'video'), or the image itself as the body")
    else:
        data = await read_body(request, MAX_UPLOAD_BYTES, code="image_too_large")
    return web.json_response({"avatar_id": await server.avatars.add(data)}, status=201)


@routes.delete("/v1/avatars/{id}")
async def avatars_delete(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    await server.avatars.delete(request.match_info["id"])
    return web.Response(status=204)


async def _first_file_part(request: web.Request) -> BodyPartReader:
    """The upload's file part: field `image` or `video` (or `file`, or any part with a file name)."""
    if (request.content_length or 0) > MAX_VIDEO_BYTES + 64 * 1024:
        raise ApiError(413, "video_too_large", f"uploads are limited to {MAX_VIDEO_BYTES // 2**20} MB")
    try:
        async with asyncio.timeout(BODY_IDLE_S):
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue  # a nested multipart holds no file of ours
                if part.filename or part.name in ("image", "video", "file"):
                    return part
    except (ValueError, AssertionError) as exc:
        raise ApiError(400, "bad_upload", f"malformed multipart body: {exc}") from None
    except TimeoutError:
        raise ApiError(408, "body_timeout", "the upload stopped arriving") from None
    raise ApiError(400, "bad_upload", "no file in the upload (send a photo as field 'image', a clip as 'video')")


def _is_video(part: BodyPartReader) -> bool:
    kind = (part.headers.get("Content-Type") or "").lower()
    name = (part.filename or "").lower()
    return part.name == "video" or kind.startswith("video/") or name.endswith(CLIP_SUFFIXES)


async def _read_image(part: BodyPartReader) -> bytes:
    data = bytearray()
    try:
        async with asyncio.timeout(60.0):
            while chunk := await asyncio.wait_for(part.read_chunk(64 * 1024), BODY_IDLE_S):
                data += chunk
                if len(data) > MAX_UPLOAD_BYTES:
                    raise ApiError(413, "image_too_large", f"images are limited to {MAX_UPLOAD_BYTES // 2**20} MB")
    except TimeoutError:
        raise ApiError(408, "body_timeout", "the upload stopped arriving") from None
    return bytes(data)


async def _save_video(part: BodyPartReader, path: Path) -> tuple[Path, str]:
    """Stream the clip to disk (never all in memory), hashing it on the way: its digest finds a
    clip prepared before."""
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "wb") as out:  # writes of 64 kB: the page cache takes them without a wait
            async with asyncio.timeout(VIDEO_TIMEOUT_S):
                while chunk := await asyncio.wait_for(part.read_chunk(256 * 1024), BODY_IDLE_S):
                    size += len(chunk)
                    if size > MAX_VIDEO_BYTES:
                        raise ApiError(413, "video_too_large", f"clips are limited to {MAX_VIDEO_BYTES // 2**20} MB")
                    digest.update(chunk)
                    out.write(chunk)
    except TimeoutError:
        path.unlink(missing_ok=True)
        raise ApiError(408, "body_timeout", "the upload stopped arriving") from None
    except OSError as exc:  # the disk is full: not the client's fault, and nothing is kept
        path.unlink(missing_ok=True)
        raise ApiError(507, "storage_full", f"the server cannot store the clip ({exc.strerror})") from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if size == 0:
        path.unlink(missing_ok=True)
        raise ApiError(400, "bad_upload", "the uploaded clip is empty")
    return path, digest.hexdigest()[:16]
