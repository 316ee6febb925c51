"""The aiohttp application: middlewares, the routes of docs/api.md (server/routes/), startup and shutdown."""

from __future__ import annotations

from aiohttp import web

from engine.config import EngineConfig
from server.avatars import MAX_UPLOAD_BYTES
from server.config import ServerConfig
from server.errors import error_middleware
from server.routes import avatars, operations, sessions
from server.security import auth_middleware, cors_middleware, host_middleware
from server.server import SERVER, Server
from speech.tts import TextToSpeech


def create_app(config: ServerConfig, engine_config: EngineConfig = EngineConfig(),
               tts: TextToSpeech | None = None) -> web.Application:
    server = Server(config, engine_config, tts)
    middlewares = [host_middleware(config.allowed_hosts), cors_middleware(config.allowed_origins), error_middleware,
                   auth_middleware(config.token)]
    app = web.Application(middlewares=middlewares, client_max_size=MAX_UPLOAD_BYTES + 64 * 1024)
    app[SERVER] = server
    app.on_startup.append(server.startup)
    app.on_shutdown.append(server.shutdown)
    for module in (operations, sessions, avatars):
        app.add_routes(module.routes)
    operations.add_static(app)
    return app
