"""Pipeline: connects the stages and owns each session's RollingState.

streaming mode: the server feeds one AudioChunk per request for as long as the
session lives (silence is audio too). The same `step` serves batch mode later.
"""

from __future__ import annotations

from pathlib import Path

from .avatar import Portrait, load_portrait
from .modules.audio_features import AudioFeatureModule
from .modules.idle_motion import IdleMotionModule
from .modules.interim_motion import InterimMotionModule
from .modules.portrait_renderer import PortraitRenderer
from .stage import AudioChunk, FrameChunk
from .stages.context import ContextStage
from .stages.decode import DecodeStage
from .stages.motion import MotionStage
from .stages.publish import PublishStage, Sink
from .state import RollingState


class Pipeline:
    """Context -> motion -> decode -> publish for one avatar."""

    def __init__(self, portrait: Portrait):
        self.stages = [
            ContextStage(AudioFeatureModule()),
            MotionStage(InterimMotionModule(), IdleMotionModule()),
            DecodeStage(PortraitRenderer(portrait)),
        ]
        self.publish = PublishStage()

    @classmethod
    def for_avatar(cls, path: Path) -> "Pipeline":
        return cls(load_portrait(path))

    def new_state(self, seed: int, sink: Sink) -> RollingState:
        state = RollingState()
        for stage in self.stages:
            stage.init_state(state.of(stage.name), seed)
        state.of(self.publish.name)["sink"] = sink
        return state

    def render(self, chunk: AudioChunk, state: RollingState) -> FrameChunk:
        data = chunk
        for stage in self.stages:
            data = stage.run(data, state.of(stage.name))
        state.next_frame = chunk.first_frame + chunk.frames
        return data

    def step(self, chunk: AudioChunk, state: RollingState):
        """Run one chunk through every stage and publish it."""
        return self.publish.run(self.render(chunk, state), state.of(self.publish.name))
