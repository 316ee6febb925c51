"""Routes for operators and pages: the demo page, static files, health, metrics, ICE servers."""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST

from engine.package_files import top_level_folder
from server.errors import ApiError
from server.security import has_token
from server.server import SERVER

PAGES = {prefix: top_level_folder(prefix) for prefix in ("static", "web")}
routes = web.RouteTableDef()


@routes.get("/")
async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(PAGES["static"] / "index.html")


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """Up or not, for anyone (load balancers); the details (workers' processes and hosts,
    sessions) with the token, or where none is set, to clients on this machine."""
    server = request.app[SERVER]
    token = server.config.token
    if not (has_token(request, token) if token else _local(request)):
        return web.json_response({"status": "ok"})
    cluster = server.engine.load()
    return web.json_response({
        "status": "ok", "sessions": len(server.sessions), "max_sessions": server.config.max_sessions,
        "available": max(0, server.config.max_sessions - server.occupied),
        "engine": server.config.engine, "workers": [w.describe() for w in server.engine.workers],
        "worker_restarts": server.engine.restarts, "uptime_s": round(time.time() - server.started, 1),
        **({"cluster": {"sessions": cluster[0], "capacity": cluster[1]}} if cluster else {}),
    })


def _local(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address((request.remote or "").split("%")[0]).is_loopback
    except ValueError:
        return False


@routes.get("/metrics")
async def metrics_page(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    return web.Response(body=server.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get("/v1/ice")
async def ice(request: web.Request) -> web.Response:
    """The STUN/TURN servers browsers should use too (behind NAT they need the same relay)."""
    server = request.app[SERVER]
    c = server.config
    servers = [{"urls": list(c.ice_servers), **({"username": c.ice_username} if c.ice_username else {}),
                **({"credential": c.ice_credential} if c.ice_credential else {})}] if c.ice_servers else []
    return web.json_response({"iceServers": servers})


@routes.get("/favicon.ico")
async def favicon(request: web.Request) -> web.Response:
    return web.Response(status=204)


def add_static(app: web.Application) -> None:
    for prefix, folder in PAGES.items():
        app.router.add_get(f"/{prefix}/{{path:.+}}", _files(folder, anywhere=prefix == "web"))


def _files(folder: Path, anywhere: bool) -> Handler:
    """Files under `folder`; a miss is the API's 404 body, like every other refusal. The JS
    client (`anywhere`) loads into pages of any origin: a page whose origin the operator has not
    allowed then gets the API's refusal as an `error` event, instead of a client that never ran."""
    folder = folder.resolve()

    async def handler(request: web.Request) -> web.FileResponse:
        path = (folder / request.match_info["path"]).resolve()
        if not path.is_relative_to(folder) or not path.is_file():
            raise ApiError(404, "not_found", f"no file {request.path}")
        return web.FileResponse(path, headers={"Access-Control-Allow-Origin": "*"} if anywhere else None)

    return handler
