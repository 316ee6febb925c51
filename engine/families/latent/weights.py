"""Loading the published DiT and wav2vec2 checkpoints from `--model-dir` (layout: config.MODEL_LAYOUT)."""

from __future__ import annotations

from pathlib import Path

from .audio import AudioEncoder
from .checkpoint import load_into, weight_files
from .config import AUDIO_DIR, DIT_DIR, AudioEncoderConfig, DitConfig, folder_config
from .dit import FlashHeadDit

AUDIO_RENAMES = {"parametrizations.weight.original0": "weight_g", "parametrizations.weight.original1": "weight_v"}
"""transformers saves the positional conv's weight norm under either name."""
AUDIO_IGNORED = ("masked_spec_embed", "lm_head", "quantizer", "project_", "adapter")
"""Training-time parts of the published wav2vec2 (the CTC head, SpecAugment's mask)."""


def load_dit(model_dir: Path) -> FlashHeadDit:
    folder = model_dir / DIT_DIR
    files = weight_files(folder)
    model = FlashHeadDit(folder_config(DitConfig, folder))
    load_into(model, [f for f in files if f.suffix == ".safetensors"] or files)
    return model.eval().requires_grad_(False)


def load_audio_encoder(model_dir: Path) -> AudioEncoder:
    folder = model_dir / AUDIO_DIR
    files = weight_files(folder)
    model = AudioEncoder(folder_config(AudioEncoderConfig, folder))
    # one format is enough: the hub folder holds the same weights as safetensors and as .bin
    load_into(model, [f for f in files if f.suffix == ".safetensors"] or files, prefix="wav2vec2.",
              renames=AUDIO_RENAMES, ignored=AUDIO_IGNORED)
    return model.eval().requires_grad_(False)
