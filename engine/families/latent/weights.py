"""Where the latent family finds each published checkpoint under `--model-dir`, and how it loads them.

The folder is laid out as the official README's download commands leave it:

    DIR/SoulX-FlashHead-1_3B/Model_Pro/        config.json, diffusion_pytorch_model*.safetensors (Apache-2.0)
    DIR/SoulX-FlashHead-1_3B/VAE_Wan/Wan2.1_VAE.pth                                         (Apache-2.0)
    DIR/wav2vec2-base-960h/                    config.json, model.safetensors or pytorch_model.bin (Apache-2.0)
"""

from __future__ import annotations

from pathlib import Path

from .audio import AudioEncoder
from .checkpoint import load_into, weight_files
from .config import AudioEncoderConfig, DitConfig, folder_config
from .dit import FlashHeadDit

DIT_DIR = Path("SoulX-FlashHead-1_3B/Model_Pro")
VAE_FILE = Path("SoulX-FlashHead-1_3B/VAE_Wan/Wan2.1_VAE.pth")
AUDIO_DIR = Path("wav2vec2-base-960h")

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
