"""Who may drive the API: the bearer token, the names the server answers to, and which
web pages may call it from a browser.

A browser sends any page's requests to a server on the user's machine, so three checks
keep other sites out. The `Host` header must name this server (an IP address, a name
without dots such as `localhost`, or one of `allowed_hosts`): a DNS-rebinding page's
host is a dotted name of the attacker's, and is refused. A request that changes state
(POST, DELETE) or opens a WebSocket from another site's page (its `Origin`, or
`Sec-Fetch-Site: cross-site`) is refused unless that origin is in `allowed_origins`, so a
simple cross-site form or `text/plain` POST reaches nothing. Allowed origins get CORS.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from server.errors import ApiError

PROTECTED = ("/v1/", "/whep", "/metrics")
CORS_METHODS = "GET, POST, DELETE, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def has_token(request: web.Request, token: str) -> bool:
    """The request carries the token (header, or `?token=` where browsers cannot set one)."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    given = credentials.strip() if scheme.lower() == "bearer" else ""  # schemes are case-insensitive
    given = given or request.query.get("token", "")
    return hmac.compare_digest(given.encode(), token.encode())


def auth_middleware(token: str) -> Middleware:
    """Requests to the API and the metrics need the token, when one is set."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token and request.method != "OPTIONS" and request.path.startswith(PROTECTED):
            if not has_token(request, token):
                raise ApiError(401, "unauthorized", "a valid bearer token is required",
                               {"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return middleware


def host_middleware(allowed: tuple[str, ...]) -> Middleware:
    """421 for a `Host` this server does not go by (see the module docstring)."""
    names = {name.lower().rstrip(".") for name in allowed}

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = (urlsplit(f"//{request.host}").hostname or "").rstrip(".")
        if not ("*" in names or host in names or _ours(host)):
            return ApiError(421, "host_not_allowed", f"this server does not answer to the name {host[:100]!r}; "
                            "its operator can list it in AVATAR_ALLOWED_HOSTS").response()
        return await handler(request)

    return middleware


def _ours(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return "." not in host or host.endswith(".localhost")


def cors_middleware(allowed: tuple[str, ...]) -> Middleware:
    """Lets the listed origins embed the client; refuses other sites' pages anything but reading."""

    def permitted(request: web.Request) -> str | None:
        origin = request.headers.get("Origin")
        if not origin:  # not a browser, or a same-origin GET: unless the browser says it is another site's
            return "" if request.headers.get("Sec-Fetch-Site") == "cross-site" else None
        if urlsplit(origin).netloc == request.host:
            return None  # same origin (the scheme may differ behind a TLS proxy): nothing to add
        return origin if ("*" in allowed or origin in allowed) else ""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = permitted(request)
        page = request.headers.get("Origin", "")
        socket = request.headers.get("Upgrade", "").lower() == "websocket"
        if origin == "" and (socket or request.method not in SAFE_METHODS):
            refusal = ApiError(403, "origin_not_allowed", f"pages of {page[:100] or 'another site'} may not use this "
                               "server's API (AVATAR_ALLOWED_ORIGINS lists those that may)").response()
            if page:  # the page may read why it was refused: the refusal itself lets nothing through
                refusal.headers.update(_cors_headers(page))
            return refusal
        if request.method == "OPTIONS" and origin is not None and page:
            # a refused origin's preflight is answered too, so that the request after it gets the
            # readable refusal above instead of a browser's opaque network error
            return web.Response(status=204, headers=_cors_headers(page))
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
