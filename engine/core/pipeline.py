"""Pipeline: connects the stages and owns each session's RollingState.

Streaming mode: the server feeds one AudioChunk per request for as long as the
session lives (silence is audio too). Batch mode (engine/batch/runner.py) runs the same
stages over a file, decode spread over processes; both give the same frames for the
same audio and seed (tests/unit/test_motion_model.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.config import MOTION_MODELS
from engine.core.stage import AudioChunk, Stage
from engine.core.state import RollingState
from engine.families.motion.audio_features import AudioFeatureModule
from engine.families.motion.dit import WEIGHTS, MotionDiT
from engine.families.motion.idle import IdleMotionModule
from engine.families.motion.interim import InterimMotionModule
from engine.families.motion.lip_closure import WEIGHTS as CLOSURE_WEIGHTS
from engine.families.motion.lip_closure import LipClosure
from engine.families.motion.speech_features import feature_module
from engine.families.portrait.avatar import load_portrait
from engine.families.portrait.renderer import PortraitRenderer
from engine.families.video.reference import VideoReference, is_video_avatar
from engine.families.video.renderer import VideoRenderer
from engine.stages.context import ContextStage
from engine.stages.decode import DecodeStage, Renderer
from engine.stages.interim_motion import InterimMotionStage
from engine.stages.motion import MotionStage


def motion_stages(kind: str = "dit", weights: Path = WEIGHTS, closure: Path | None = CLOSURE_WEIGHTS) -> list:
    """Context and audio-to-motion stages: the trained MotionDiT (with the lip-closure
    detector unless `closure` is None), or the INTERIM mapping."""
    if kind == "dit":
        detector = LipClosure(closure) if closure else None
        model = MotionDiT(weights)
        return [ContextStage(feature_module(model.config.audio_dim)), MotionStage(model, closure=detector)]
    if kind == "interim":
        return [ContextStage(AudioFeatureModule()), InterimMotionStage(InterimMotionModule(), IdleMotionModule())]
    raise ValueError(f"unknown motion model {kind!r}; choose one of {MOTION_MODELS}")


def renderer_for(path: Path) -> Renderer:
    if is_video_avatar(path):
        return VideoRenderer(VideoReference.load(path))
    return PortraitRenderer(load_portrait(path))


class Pipeline:
    """The one orchestrator of the chunk loop: context -> motion [-> decode] for one avatar,
    used by the engine worker, batch mode and the tests alike."""

    def __init__(self, stages: list[Stage]):
        self.stages = stages

    @classmethod
    def for_avatar(cls, path: Path, motion: str = "dit") -> Pipeline:
        """A prepared avatar of either kind: a portrait (.png) or a video avatar (.clip.npz)."""
        return cls([*motion_stages(motion), DecodeStage(renderer_for(path))])

    def new_state(self, seed: int) -> RollingState:
        return RollingState(stages={stage.name: stage.new_state(seed) for stage in self.stages})

    def render(self, chunk: AudioChunk, state: RollingState) -> Any:
        """One chunk through every stage: the last stage's output (a FrameChunk with a
        decode stage, a MotionChunk without)."""
        data: Any = chunk  # each stage's output is the next one's input
        for stage in self.stages:
            data = stage.run(data, state.stages[stage.name])
        state.next_frame = chunk.first_frame + chunk.frames
        return data
