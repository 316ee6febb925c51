"""Routes of the avatar store: list, upload (multipart or a raw image), delete."""

from __future__ import annotations

import asyncio

from aiohttp import BodyPartReader, web

from ..avatars import MAX_UPLOAD_BYTES
from ..errors import BODY_TIMEOUT_S, ApiError, read_body
from ..server import SERVER

routes = web.RouteTableDef()


@routes.get("/v1/avatars")
async def avatars_list(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    return web.json_response(server.avatars.listing())


@routes.post("/v1/avatars")
async def avatars_add(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    data = await _upload_bytes(request)
    return web.json_response({"avatar_id": await server.avatars.add(data)}, status=201)


@routes.delete("/v1/avatars/{id}")
async def avatars_delete(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    server.avatars.delete(request.match_info["id"])
    return web.Response(status=204)


async def _upload_bytes(request: web.Request) -> bytes:
    """The image of a multipart upload (first file part), or a raw image body."""
    if (request.content_length or 0) > MAX_UPLOAD_BYTES + 64 * 1024:
        raise ApiError(413, "image_too_large", f"images are limited to {MAX_UPLOAD_BYTES // 2**20} MB")
    if not request.content_type.startswith("multipart/"):
        return await read_body(request, MAX_UPLOAD_BYTES, code="image_too_large")
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue  # a nested multipart holds no image of ours
                if part.filename or part.name in ("image", "file"):
                    return await part.read(decode=False)
    except (ValueError, AssertionError) as exc:
        raise ApiError(400, "bad_upload", f"malformed multipart body: {exc}") from None
    except TimeoutError:
        raise ApiError(408, "body_timeout", f"the upload did not arrive within {BODY_TIMEOUT_S:.0f} s") from None
    raise ApiError(400, "bad_upload", "no image part in the upload (send it as field 'image')")
