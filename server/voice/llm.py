"""ChatLLM: any OpenAI-compatible streaming chat endpoint (Ollama, vLLM, OpenAI, ...)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp


class LlmError(Exception):
    """The LLM could not be reached or answered with an error."""


@dataclass(frozen=True)
class LlmConfig:
    base_url: str = ""
    """e.g. http://127.0.0.1:11434/v1 (Ollama); empty: chat mode says it has no LLM."""
    model: str = ""
    api_key: str = ""
    system_prompt: str = ("You are a friendly assistant speaking through a talking avatar. "
                          "Answer in one to three short spoken sentences, without lists or markup.")
    timeout_s: float = 60.0


class ChatLLM:
    """Streams the assistant's reply, token by token, for a list of chat messages. One
    connection pool for all turns: a remote endpoint's TCP and TLS handshakes (one or two
    round trips each) are paid once, not before every answer."""

    def __init__(self, config: LlmConfig):
        self.config = config
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    def _pool(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.timeout_s))
        return self._http

    @property
    def configured(self) -> bool:
        return bool(self.config.base_url)

    async def stream(self, messages: list[dict]) -> AsyncIterator[str]:
        c = self.config
        headers = {"Authorization": f"Bearer {c.api_key}"} if c.api_key else {}
        body = {"model": c.model, "stream": True,
                "messages": [{"role": "system", "content": c.system_prompt}, *messages]}
        url = c.base_url.rstrip("/") + "/chat/completions"
        try:
            async with self._pool().post(url, json=body, headers=headers) as res:
                if res.status >= 400:
                    raise LlmError(f"the LLM answered {res.status}: {(await res.text())[:200]}")
                async for piece in _sse_content(res.content):
                    yield piece
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LlmError(f"the LLM at {c.base_url} could not be reached: {exc}") from None


async def _sse_content(stream: aiohttp.StreamReader) -> AsyncIterator[str]:
    async for raw in stream:
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            delta = json.loads(data)["choices"][0].get("delta", {})
        except (ValueError, KeyError, IndexError, TypeError):
            continue
        if delta.get("content"):
            yield delta["content"]
