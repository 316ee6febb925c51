"""Publish: hand finished frames to their sink (the shared-memory ring, or a file encoder)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..stage import FrameChunk, Stage

Sink = Callable[[FrameChunk], Any]


class PublishStage(Stage[FrameChunk, Any]):
    name = "publish"

    def run(self, data: FrameChunk, state: dict[str, Any]) -> Any:
        return state["sink"](data)
