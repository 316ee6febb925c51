"""SessionHost: the Pipelines and RollingStates of the sessions one engine worker serves,
whatever carries its requests (a pipe from the local EngineClient, or Ray calls)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.assembly import pipeline_for
from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.core.pipeline import Pipeline
from engine.core.stage import AudioChunk, FrameChunk
from engine.core.state import RollingState
from engine.families.portrait.avatar import DEFAULT_AVATAR

IDLE_PIPELINES = 2


@dataclass
class HostedSession:
    """A session on this worker: its avatar (which Pipeline) and its RollingState."""

    avatar: str
    state: RollingState


class SessionHost:
    """Pipelines by avatar path (analysis is per avatar, not per session), most recently used
    last, and the sessions placed here."""

    def __init__(self, config: EngineConfig):
        self.config = config
        self.pipelines: OrderedDict[str, Pipeline] = OrderedDict()
        self.sessions: dict[str, HostedSession] = {}
        self.preload = config.preload_avatar or str(DEFAULT_AVATAR)

    def load(self, avatar: str) -> Pipeline:
        """A new Pipeline for `avatar` (touches no state: the local worker calls it on a thread)."""
        return pipeline_for(Path(avatar), self.config)

    def pipeline(self, avatar: str) -> Pipeline:
        if avatar not in self.pipelines:
            self.pipelines[avatar] = self.load(avatar)
            self.forget_idle()
        self.pipelines.move_to_end(avatar)
        return self.pipelines[avatar]

    def forget_idle(self) -> None:
        """Keep the avatars in use, the preloaded one and IDLE_PIPELINES more: a video
        avatar holds its clip (about 55 MB a minute), so idle ones must not pile up."""
        used = {p.avatar for p in self.sessions.values()} | {self.preload}
        idle = [a for a in self.pipelines if a not in used]
        for avatar in idle[: max(0, len(idle) - IDLE_PIPELINES)]:
            del self.pipelines[avatar]

    def open(self, session_id: str, avatar: str, seed: int) -> None:
        self.sessions[session_id] = HostedSession(avatar, self.pipeline(avatar).new_state(seed))

    def close(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)
        self.forget_idle()

    def render(self, session_id: str, first_frame: int, pcm: np.ndarray, frames: int) -> FrameChunk:
        placed = self.sessions[session_id]
        if len(pcm) != frames * SAMPLES_PER_FRAME:
            raise ValueError(f"chunk has {len(pcm)} samples, expected {frames * SAMPLES_PER_FRAME}")
        return self.pipelines[placed.avatar].render(AudioChunk(first_frame, frames, pcm), placed.state)
