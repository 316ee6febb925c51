"""Bearer-token auth and CORS for the API, the WebSockets and WHEP."""

from __future__ import annotations

import hmac

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .errors import ApiError

PROTECTED = ("/v1/", "/whep")
CORS_METHODS = "GET, POST, DELETE, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type"


def auth_middleware(token: str) -> Middleware:
    """Requests to the API need the token (header, or `?token=` where browsers cannot set one)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token and request.method != "OPTIONS" and request.path.startswith(PROTECTED):
            scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
            given = credentials.strip() if scheme.lower() == "bearer" else ""  # schemes are case-insensitive
            given = given or request.query.get("token", "")
            if not hmac.compare_digest(given.encode(), token.encode()):
                raise ApiError(401, "unauthorized", "a valid bearer token is required",
                               {"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return middleware


def cors_middleware(allowed: tuple[str, ...]) -> Middleware:
    """Lets the listed origins embed the client; refuses foreign WebSocket origins."""

    def permitted(request: web.Request) -> str | None:
        origin = request.headers.get("Origin")
        if not origin or origin == f"{request.scheme}://{request.host}":
            return None  # same origin (or not a browser): nothing to add
        return origin if ("*" in allowed or origin in allowed) else ""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = permitted(request)
        if origin == "" and request.headers.get("Upgrade", "").lower() == "websocket":
            return ApiError(403, "origin_not_allowed", "this origin may not open sessions' sockets").response()
        if origin and request.method == "OPTIONS":
            return web.Response(status=204, headers=_cors_headers(origin))
        try:
            response = await handler(request)
        except ApiError as exc:  # errors, too, must be readable by the embedding page
            response = exc.response()
        if origin:
            response.headers.update(_cors_headers(origin))
        return response

    return middleware


def _cors_headers(origin: str) -> dict[str, str]:
    return {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Methods": CORS_METHODS,
            "Access-Control-Allow-Headers": CORS_HEADERS, "Access-Control-Expose-Headers": "Location",
            "Vary": "Origin"}
