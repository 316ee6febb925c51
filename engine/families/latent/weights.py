"""Loading the published DiT, VAE and wav2vec2 checkpoints from `--model-dir` (layout: config.MODEL_LAYOUT)."""

from __future__ import annotations

from pathlib import Path

import torch

from .audio import AudioEncoder
from .checkpoint import CheckpointError, load_into, weight_files
from .config import (
    AUDIO_DIR,
    DIT_DIR,
    MODEL_LAYOUT,
    VAE_FILE,
    AudioEncoderConfig,
    DitConfig,
    VaeConfig,
    folder_config,
)
from .dit import FlashHeadDit
from .vae import VideoVae

AUDIO_RENAMES = {"parametrizations.weight.original0": "weight_g", "parametrizations.weight.original1": "weight_v"}
"""transformers saves the positional conv's weight norm under either name."""
AUDIO_IGNORED = ("masked_spec_embed", "lm_head", "quantizer", "project_", "adapter")
"""Training-time parts of the published wav2vec2 (the CTC head, SpecAugment's mask)."""


def dtype_on(device: torch.device) -> torch.dtype:
    """The DiT's and VAE's precision: bf16 on CUDA, fp32 on a CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def one_format(folder: Path) -> list[Path]:
    """The folder's safetensors, else its .pth/.bin: a hub folder may hold the same weights twice."""
    files = weight_files(folder)
    return [f for f in files if f.suffix == ".safetensors"] or files


def load_dit(model_dir: Path) -> FlashHeadDit:
    folder = model_dir / DIT_DIR
    model = FlashHeadDit(folder_config(DitConfig, folder))
    load_into(model, one_format(folder))
    return model.eval().requires_grad_(False)


def load_vae(model_dir: Path, config: VaeConfig) -> VideoVae:
    path = model_dir / VAE_FILE
    if not path.is_file():
        raise CheckpointError(f"{path} is missing (the layout under --model-dir:\n{MODEL_LAYOUT})")
    model = VideoVae(config)
    load_into(model, [path])
    return model.eval().requires_grad_(False)


def load_audio_encoder(model_dir: Path) -> AudioEncoder:
    folder = model_dir / AUDIO_DIR
    model = AudioEncoder(folder_config(AudioEncoderConfig, folder))
    load_into(model, one_format(folder), prefix="wav2vec2.", renames=AUDIO_RENAMES, ignored=AUDIO_IGNORED)
    return model.eval().requires_grad_(False)
