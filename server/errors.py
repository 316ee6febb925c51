"""API errors: every refusal is a 4xx with {"error": {"code", "message"}} (docs/api.md)."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web
from aiohttp.typedefs import Handler


class ApiError(Exception):
    """A refusal the client can act on."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}

    def response(self) -> web.Response:
        return web.json_response(
            {"error": {"code": self.code, "message": self.message}}, status=self.status, headers=self.headers
        )


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = exc.reason.lower().replace(" ", "_")
        return ApiError(exc.status, code, exc.reason).response()


BODY_IDLE_S = 10.0  # a body that stops arriving for this long is refused
BODY_TIMEOUT_S = 60.0  # and one that trickles in, after this long in all


async def read_body(request: web.Request, limit: int, code: str = "body_too_large") -> bytes:
    """The whole request body, however many TCP writes or chunks it came in; 413 past `limit`."""
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, code, f"request body over {limit} bytes")
    parts, size = [], 0
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            while chunk := await asyncio.wait_for(request.content.read(64 * 1024), BODY_IDLE_S):
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, code, f"request body over {limit} bytes")
                parts.append(chunk)
    except TimeoutError:
        raise ApiError(408, "body_timeout", "the request body stopped arriving") from None
    return b"".join(parts)


async def read_json(request: web.Request, limit: int = 256 * 1024) -> dict:
    """The request body as a JSON object, or a 400/413 that says what is wrong."""
    body = parse_json(await read_body(request, limit))
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "request body must be a JSON object")
    return body


def parse_json(raw: bytes | str, code: str = "bad_json") -> object:
    """json.loads whose failures, deep nesting included, are a 400."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, code, "the JSON is nested too deeply") from None
    except ValueError:
        raise ApiError(400, code, "not valid JSON") from None
