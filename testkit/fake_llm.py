"""A small local OpenAI-compatible chat server for tests: streams a fixed answer, records requests."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from .server import free_port


class FakeLLM:
    """POST /v1/chat/completions with stream=true -> SSE chunks of `answer`."""

    def __init__(self, answer: str):
        self.answer = answer
        self.requests: list[dict] = []
        self.peers: list[tuple] = []  # each request's client address: a reused connection repeats one
        self.last_first_token_ms = 0.0  # request arrival -> first token written
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        body = await request.json()
        self.requests.append(body)
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else ())
        res = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await res.prepare(request)
        try:
            for i, word in enumerate(self.answer.split(" ")):
                chunk = {"choices": [{"index": 0, "delta": {"content": word + " "}}]}
                await res.write(f"data: {json.dumps(chunk)}\n\n".encode())
                if i == 0:
                    self.last_first_token_ms = (time.monotonic() - arrived) * 1000
                await asyncio.sleep(0.01)
            await res.write(b"data: [DONE]\n\n")
        except ConnectionResetError:
            pass  # the server dropped the reply (its speaker went on talking): not an error here
        return res
