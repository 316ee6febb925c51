"""API errors: every refusal is a 4xx with {"error": {"code", "message"}} (api.md)."""

from __future__ import annotations

from aiohttp import web


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
async def error_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = exc.reason.lower().replace(" ", "_")
        return ApiError(exc.status, code, exc.reason).response()


async def read_json(request: web.Request, limit: int = 256 * 1024) -> dict:
    """The request body as a JSON object, or a 400/413 that says what is wrong."""
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, "body_too_large", f"request body over {limit} bytes")
    raw = await request.content.read(limit + 1)
    if len(raw) > limit:
        raise ApiError(413, "body_too_large", f"request body over {limit} bytes")
    try:
        import json

        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "bad_json", "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "request body must be a JSON object")
    return body
