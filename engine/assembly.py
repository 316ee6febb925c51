"""Concrete pipelines: which Modules and Stages make the motion, which renderer draws an
avatar, and how a user's file becomes one. Core (engine/core) knows only the Stage and
Pipeline contracts; a new family lands here and in engine/families/, never in core."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from engine.config import MOTION_MODELS, EngineConfig
from engine.core.pipeline import Pipeline
from engine.core.stream import motion_track
from engine.families.motion.audio_features import AudioFeatureModule
from engine.families.motion.delay import motion_delay_frames
from engine.families.motion.dit import WEIGHTS, MotionDiT
from engine.families.motion.idle import IdleMotionModule
from engine.families.motion.interim import InterimMotionModule
from engine.families.motion.lip_closure import WEIGHTS as CLOSURE_WEIGHTS
from engine.families.motion.lip_closure import LipClosure
from engine.families.motion.lip_shape import WEIGHTS as SHAPE_WEIGHTS
from engine.families.motion.lip_shape import LipShape
from engine.families.motion.speech_features import DIM as SPEECH_DIM
from engine.families.motion.speech_features import feature_module
from engine.families.portrait.avatar import load_portrait
from engine.families.portrait.renderer import PortraitRenderer
from engine.families.video.clip import SUFFIXES
from engine.families.video.reference import VideoReference, is_video_avatar
from engine.families.video.renderer import VideoRenderer
from engine.stages.context import ContextStage
from engine.stages.decode import DecodeStage, Renderer
from engine.stages.interim_motion import InterimMotionStage
from engine.stages.motion import MotionStage


def motion_stages(kind: str = "dit", weights: Path = WEIGHTS, closure: Path | None = CLOSURE_WEIGHTS,
                  lip_shape: Path | None = SHAPE_WEIGHTS) -> list:
    """Context and audio-to-motion stages: the trained MotionDiT (with the lip-closure and
    lip-shape detectors unless their weights are None), or the INTERIM mapping."""
    if kind == "dit":
        detector = LipClosure(closure) if closure else None
        model = MotionDiT(weights)
        # the lip shape reads the speech encoder's rows: a log-mel-only model has none
        shape = LipShape(lip_shape) if lip_shape and model.config.audio_dim == SPEECH_DIM else None
        return [ContextStage(feature_module(model.config.audio_dim)),
                MotionStage(model, closure=detector, lip_shape=shape)]
    if kind == "interim":
        return [ContextStage(AudioFeatureModule()), InterimMotionStage(InterimMotionModule(), IdleMotionModule())]
    raise ValueError(f"unknown motion model {kind!r}; choose one of {MOTION_MODELS}")


def renderer_for(path: Path) -> Renderer:
    if is_video_avatar(path):
        return VideoRenderer(VideoReference.load(path))
    return PortraitRenderer(load_portrait(path))


def pipeline_for(path: Path, config: EngineConfig = EngineConfig()) -> Pipeline:
    """A prepared avatar of either kind (a portrait .png or a video avatar .clip.npz) for the
    CPU families, or a photo for the latent family (its models loaded once per process)."""
    if config.family == "latent":
        if is_video_avatar(path):
            raise ValueError("the latent family takes photo avatars only")
        from engine.families.latent.pipeline import latent_pipeline, worker_models

        models = worker_models(config.model_dir, offload=config.offload, ranks=config.dit_gpus)
        return latent_pipeline(path, models, config.frame)
    return Pipeline([*motion_stages(config.motion), DecodeStage(renderer_for(path))])


def model_motion(pcm: np.ndarray) -> np.ndarray:
    """(frames, DIM) the DiT's motion of a whole recording, as a live session would stream it."""
    return motion_track(Pipeline(motion_stages("dit")), pcm, motion_delay_frames("dit"))


def prepare_file(path: Path, folder: Path, size: int = 512) -> Path:
    """The prepared avatar for a photo (.png, analysed) or a clip (.clip.npz, cached by its
    content, a progress line on stderr while it works). Raises ValueError (NoFaceError,
    ClipError) with a reason a person can act on, or OSError."""
    if path.suffix.lower() not in SUFFIXES:
        from engine.families.portrait.avatar import prepare_upload

        return folder / f"{prepare_upload(path.read_bytes(), str(folder))}.png"
    from engine.families.video.prepare import prepare_clip
    from engine.families.video.reference import SUFFIX

    def progress(share: float, stage: str) -> None:
        sys.stderr.write(f"\r\033[Kpreparing {path.name}: {share:4.0%} {stage}")
        sys.stderr.flush()

    if not path.is_file():
        raise OSError(f"no such file: {path}")
    avatar_id = prepare_clip(path, folder, model_motion, size, progress)
    sys.stderr.write("\n")
    return folder / f"{avatar_id}{SUFFIX}"
