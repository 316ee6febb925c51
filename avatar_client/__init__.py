"""Python clients of avatar-server (no torch): a WebRTC viewer for tests, benchmarks and agents,
and `avatar_client.pipecat` for pipecat pipelines.

Imported lazily, so each client needs only its own packages: an agent's environment with
pipecat and aiohttp can use `avatar_client.pipecat` without aiortc.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import AgentClient, AgentError, AudioStream
    from .viewer import AvatarViewer

_HOMES = {"AgentClient": "agent", "AgentError": "agent", "AudioStream": "agent", "AvatarViewer": "viewer"}
__all__ = ["AgentClient", "AgentError", "AudioStream", "AvatarViewer"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'avatar_client' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
