"""A latent-family Pipeline for one photo avatar, and the models shared by every avatar of a worker."""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np
import torch

from engine.core.pipeline import Pipeline
from engine.core.state import RollingState
from engine.families.portrait.scene import canvas, load_scene
from media.frame_size import FrameSize, frame_dims

from .color import ColorMatch
from .models import LatentModels, load_models
from .paste import PasteBack
from .stages import A2VStage, LatentContextStage, RefineStage, StreamDecodeStage

log = logging.getLogger("engine.latent")


class LatentPipeline(Pipeline):
    """Its stages share one LatentSession instead of a slice each: the loop that
    engine/core/stage.py allows (stages.py says why)."""

    def new_state(self, seed: int) -> RollingState:
        session = self.stages[0].new_state(seed)
        return RollingState(stages={stage.name: session for stage in self.stages})


@lru_cache(maxsize=2)
def worker_models(model_dir: str, device: str = "auto", offload: bool = False, ranks: int = 1) -> LatentModels:
    """Loaded once per worker process, whatever number of avatars it serves."""
    models = load_models(Path(model_dir), device, offload, ranks)
    log.info("latent family: %s on %s (%s%s%s)", model_dir, models.device, str(models.dtype).removeprefix("torch."),
             ", DiT blocks offloaded" if offload else "", f", DiT sequence parallel over {ranks}" if ranks > 1 else "")
    return models


def read_photo(path: Path) -> np.ndarray:
    """A photo avatar as BGR."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"{path} is not an image the latent family can read (it takes photo avatars only)")
    return bgr


def reference_frame(path: Path, size: int) -> np.ndarray:
    """The photo scaled to cover size x size and centre-cropped, RGB (as the official pipeline)."""
    bgr = read_photo(path)
    h, w = bgr.shape[:2]
    scale = max(size / h, size / w)
    fh, fw = max(size, int(np.ceil(h * scale))), max(size, int(np.ceil(w * scale)))
    scaled = cv2.resize(bgr, (fw, fh), interpolation=cv2.INTER_AREA)
    top, left = (fh - size) // 2, (fw - size) // 2
    return np.ascontiguousarray(cv2.cvtColor(scaled[top : top + size, left : left + size], cv2.COLOR_BGR2RGB))


def photo_tensor(models: LatentModels, rgb: np.ndarray) -> torch.Tensor:
    """[1, 3, 1, h, w] in [-1, 1] on the models' device."""
    return (torch.from_numpy(rgb).to(models.device).permute(2, 0, 1).float() / 127.5 - 1)[None, :, None]


@torch.inference_mode()
def reference_latents(models: LatentModels, photo: torch.Tensor) -> torch.Tensor:
    """The photo held still for a whole chunk, encoded once per avatar: [1, z, latent frames, h, w]."""
    video = photo.expand(-1, -1, models.stream.chunk_frames, -1, -1)
    return models.vae.encode(video.to(models.dtype))


def refine_stage(path: Path, size: FrameSize) -> RefineStage:
    """Square frames scale the head; wider or taller ones paste it into the photo's scene."""
    width, height = frame_dims(size)
    if width == height:
        return RefineStage(width)
    portrait = cv2.cvtColor(read_photo(path), cv2.COLOR_BGR2RGB)
    return RefineStage(width, PasteBack(*canvas(load_scene(path, portrait), width, height)))


def latent_pipeline(path: Path, models: LatentModels, size: FrameSize) -> LatentPipeline:
    """`size`: the streamed frames' side, or (width, height)."""
    rgb = reference_frame(path, models.stream.head_size)
    photo = photo_tensor(models, rgb)
    latents = reference_latents(models, photo)
    decode = StreamDecodeStage(models, ColorMatch(photo))
    return LatentPipeline([LatentContextStage(models, rgb, latents), A2VStage(models, latents, decode), decode,
                           refine_stage(path, size)])
