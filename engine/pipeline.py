"""Pipeline: connects the stages and owns each session's RollingState.

Streaming mode: the server feeds one AudioChunk per request for as long as the
session lives (silence is audio too). Batch mode (engine/batch.py) runs the same
stages over a file, decode spread over processes; both give the same frames for the
same audio and seed (tests/unit/test_motion_model.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .avatar import Portrait, load_portrait
from .config import MOTION_MODELS
from .modules.audio_features import AudioFeatureModule
from .modules.idle_motion import IdleMotionModule
from .modules.interim_motion import InterimMotionModule
from .modules.lip_closure import WEIGHTS as CLOSURE_WEIGHTS
from .modules.lip_closure import LipClosure
from .modules.mel_features import MelFeatureModule
from .modules.motion_dit import WEIGHTS, MotionDiT
from .modules.portrait_renderer import PortraitRenderer
from .stage import AudioChunk, FrameChunk, Stage
from .stages.context import ContextStage
from .stages.decode import DecodeStage
from .stages.interim_motion import InterimMotionStage
from .stages.motion import MotionStage
from .stages.publish import PublishStage, Sink
from .state import RollingState


def motion_stages(kind: str = "dit", weights: Path = WEIGHTS, closure: Path | None = CLOSURE_WEIGHTS) -> list:
    """Context and audio-to-motion stages: the trained MotionDiT (with the lip-closure
    detector unless `closure` is None), or the INTERIM mapping."""
    if kind == "dit":
        detector = LipClosure(closure) if closure else None
        return [ContextStage(MelFeatureModule()), MotionStage(MotionDiT(weights), closure=detector)]
    if kind == "interim":
        return [ContextStage(AudioFeatureModule()), InterimMotionStage(InterimMotionModule(), IdleMotionModule())]
    raise ValueError(f"unknown motion model {kind!r}; choose one of {MOTION_MODELS}")


class Pipeline:
    """Context -> motion -> decode -> publish for one avatar."""

    def __init__(self, stages: list[Stage]):
        self.stages = stages
        self.publish = PublishStage()

    @classmethod
    def for_portrait(cls, portrait: Portrait, motion: str = "dit") -> Pipeline:
        return cls([*motion_stages(motion), DecodeStage(PortraitRenderer(portrait))])

    @classmethod
    def for_avatar(cls, path: Path, motion: str = "dit") -> Pipeline:
        return cls.for_portrait(load_portrait(path), motion)

    def new_state(self, seed: int, sink: Sink) -> RollingState:
        state = RollingState()
        for stage in self.stages:
            stage.init_state(state.of(stage.name), seed)
        state.of(self.publish.name)["sink"] = sink
        return state

    def render(self, chunk: AudioChunk, state: RollingState) -> FrameChunk:
        data: Any = chunk  # each stage's output is the next one's input
        for stage in self.stages:
            data = stage.run(data, state.of(stage.name))
        state.next_frame = chunk.first_frame + chunk.frames
        return data

    def step(self, chunk: AudioChunk, state: RollingState) -> Any:
        """Run one chunk through every stage and publish it."""
        return self.publish.run(self.render(chunk, state), state.of(self.publish.name))
