"""A network the server must not be turned against, on loopback: an internal service with
secrets, a WHIP ingest that turns hostile in every way the security issue found, and a TCP
port that accepts and then never says a word. Each runs on a thread of its own, so it
keeps answering whatever the test's event loop does, and counts what reached it."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
from collections import Counter

from aiohttp import web

SECRET = "INTERNAL-ADMIN-PANEL db_password=hunter2 api_key=sk-123"


class HostileNetwork:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()  # "service /path" -> requests seen
        self.silent_connections = 0
        self._held: list[socket.socket] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.secret_port = self._serve(self._secret_app())
        self.whip_port = self._serve(self._whip_app())
        self.silent_port = self._silent()

    # --- the internal service: never to be reached ------------------------------------
    def _secret_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._secret)
        return app

    async def _secret(self, request: web.Request) -> web.Response:
        self.hits[f"secret {request.path}"] += 1
        return web.Response(text=SECRET)

    # --- a listed WHIP ingest that misbehaves -------------------------------------------
    def _whip_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._whip)
        return app

    async def _whip(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[f"whip {path}"] += 1
        await request.read()
        if path == "/status":  # an internal page behind a listed host: its text must not come back
            return web.Response(status=200, text=SECRET)
        if path == "/redirect":
            raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{self.secret_port}/secret")
        if path == "/notsdp":  # and a Location pointing elsewhere, which must not be called
            return web.Response(status=201, text="hello", headers={
                "Location": f"http://127.0.0.1:{self.secret_port}/delete-me"})
        if path == "/gzip":  # 32 MiB of zeros in 32 kB: never inflated
            return web.Response(status=201, body=gzip.compress(bytes(32 << 20)), headers={
                "Content-Encoding": "gzip", "Content-Type": "application/sdp"})
        if path == "/huge":
            return await self._huge(request)
        if path == "/slow":
            await asyncio.sleep(60)
        return web.Response(status=404)

    async def _huge(self, request: web.Request) -> web.StreamResponse:
        res = web.StreamResponse(status=201, headers={"Content-Type": "application/sdp"})
        await res.prepare(request)
        try:
            for _ in range(300):  # 300 MB, if anyone reads it
                await res.write(b"v" * (1 << 20))
        except (ConnectionError, RuntimeError):
            pass
        return res

    # --- an "ingest" that accepts and never answers the handshake ------------------------
    def _silent(self) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept_forever, args=(listener,), daemon=True).start()
        return listener.getsockname()[1]

    def _accept_forever(self, listener: socket.socket) -> None:
        while True:
            conn, _ = listener.accept()
            self.silent_connections += 1
            self._held.append(conn)  # held open, never read or written

    def _serve(self, app: web.Application) -> int:
        async def start() -> int:
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        return asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)

    @property
    def secret_hits(self) -> int:
        return sum(n for name, n in self.hits.items() if name.startswith("secret"))
