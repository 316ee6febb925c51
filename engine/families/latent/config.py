"""The latent family's model sizes: SoulX-FlashHead 1.3B (Pro) at full size, and a tiny one for CPU tests.

Field names follow the checkpoint's `config.json` (diffusers style), so a downloaded model folder
configures the DiT it holds; the audio-adapter sizes are fixed in the official code and appear
here so that a reduced model can shrink them too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

C = TypeVar("C")

DIT_DIR = Path("SoulX-FlashHead-1_3B/Model_Pro")
VAE_FILE = Path("SoulX-FlashHead-1_3B/VAE_Wan/Wan2.1_VAE.pth")
AUDIO_DIR = Path("wav2vec2-base-960h")
MODEL_LAYOUT = """\
    DIR/SoulX-FlashHead-1_3B/Model_Pro/              config.json, diffusion_pytorch_model*.safetensors
    DIR/SoulX-FlashHead-1_3B/VAE_Wan/Wan2.1_VAE.pth
    DIR/wav2vec2-base-960h/                          config.json, model.safetensors or pytorch_model.bin"""
"""`--model-dir` as the official README's download commands leave it (both repositories Apache-2.0)."""


def missing_parts(model_dir: Path) -> list[str]:
    """The parts of the layout a folder lacks (checked before any worker starts)."""
    found = [(model_dir / DIT_DIR).is_dir(), (model_dir / VAE_FILE).is_file(), (model_dir / AUDIO_DIR).is_dir()]
    return [str(model_dir / part) for part, ok in zip((DIT_DIR, VAE_FILE, AUDIO_DIR), found) if not ok]


def _known(cls: type, saved: dict[str, Any]) -> dict[str, Any]:
    """The saved settings `cls` has, JSON lists as tuples."""
    known = {f.name for f in fields(cls)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known}


def folder_config(cls: type[C], folder: Path) -> C:
    """The config.json in a model folder (diffusers or transformers style), keeping the fields
    `cls` has; the defaults (the published sizes) when the folder has none."""
    path = folder / "config.json"
    return cls(**_known(cls, json.loads(path.read_text()) if path.is_file() else {}))


@dataclass(frozen=True)
class DitConfig:
    dim: int = 1536
    in_dim: int = 32
    """The noisy latents (16 channels) and the reference image's latents (16), side by side."""
    ffn_dim: int = 8960
    out_dim: int = 16
    text_dim: int = 4096
    """Wan2.1's text embedding survives in the checkpoint; this model conditions on audio only."""
    freq_dim: int = 256
    eps: float = 1e-6
    vae_stride: tuple[int, int, int] = (4, 8, 8)
    patch_size: tuple[int, int, int] = (1, 2, 2)
    num_heads: int = 12
    num_layers: int = 30
    audio_window: int = 5
    """Video frames of wav2vec2 features around each frame (2 before, 2 after)."""
    audio_layers: int = 12
    """wav2vec2's hidden states, all stacked."""
    audio_dim: int = 768
    audio_hidden: int = 512
    audio_tokens: int = 32
    """Context tokens per latent frame that its video patches cross-attend to."""

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads


TINY_DIT = DitConfig(dim=48, in_dim=8, ffn_dim=96, out_dim=4, text_dim=16, freq_dim=32, num_heads=2,
                     num_layers=2, audio_layers=2, audio_dim=16, audio_hidden=24, audio_tokens=4)
"""head_dim 24 splits evenly into the rotary embedding's three axes (8 + 8 + 8)."""


@dataclass(frozen=True)
class AudioEncoderConfig:
    """wav2vec2-base (facebook/wav2vec2-base-960h): conv feature encoder, then a post-norm transformer."""

    conv_dim: tuple[int, ...] = (512,) * 7
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    num_conv_pos_embeddings: int = 128
    num_conv_pos_embedding_groups: int = 16
    layer_norm_eps: float = 1e-5


TINY_AUDIO = AudioEncoderConfig(conv_dim=(8, 8, 8), conv_kernel=(10, 3, 2), conv_stride=(5, 2, 2), hidden_size=16,
                                num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2)


# The latent space's per-channel statistics (Wan2.1): latents are handed to the DiT standardised
LATENT_MEAN = (-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
               0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921)
LATENT_STD = (2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
              3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160)


@dataclass(frozen=True)
class VaeConfig:
    dim: int = 96
    z_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2, 4, 4)
    num_res_blocks: int = 2
    temporal_downsample: tuple[bool, ...] = (False, True, True)
    latent_mean: tuple[float, ...] = LATENT_MEAN
    latent_std: tuple[float, ...] = LATENT_STD


TINY_VAE = VaeConfig(dim=8, z_dim=4, dim_mult=(1, 2, 2, 2), latent_mean=LATENT_MEAN[:4], latent_std=LATENT_STD[:4])


@dataclass(frozen=True)
class StreamConfig:
    """SoulX-FlashHead's streaming schedule (its configs/infer_params.yaml)."""

    chunk_frames: int = 33
    """Video frames one generation makes (9 latents)."""
    boundary_latents: int = 2
    """Latents at the head of each chunk that re-encode the previous chunk's last frames."""
    steps: int = 4
    shift: float = 5.0
    """The flow-matching timesteps' shift towards the noisy end."""
    audio_cache_s: int = 8
    """Seconds of past audio wav2vec2 hears at each generation."""
    head_size: int = 512
    """The generated square face, in pixels."""
    temporal_stride: int = 4
    carry_decode_cache: bool = False
    """Decode only each chunk's new latents, continuing the previous chunk's causal cache (7 of 9
    latents decoded, no seam of a fresh cache), instead of the official per-chunk decode that
    the published model was validated with."""
    generation_lead: int = 8
    """Frames of the previous chunk still to show when the next chunk's audio is complete: its
    generation runs in the background meanwhile, so it must take under this (320 ms) or the
    stream waits for the rest. A slower card sets more in latent.json ({"stream":
    {"generation_lead": 20}}); each frame adds 40 ms of delay. At 8 the first generated frame
    is due 1.44 s after its sound (36 frames)."""

    @property
    def boundary_frames(self) -> int:
        return (self.boundary_latents - 1) * self.temporal_stride + 1

    @property
    def new_frames(self) -> int:
        """Frames each generation adds to the stream."""
        return self.chunk_frames - self.boundary_frames

    @property
    def delay_frames(self) -> int:
        """How far the picture lags its sound: a chunk's new frames wait for their audio, then
        for the generation's lead."""
        return self.new_frames + self.generation_lead


TINY_STREAM = StreamConfig(audio_cache_s=2, head_size=32)
LOCAL_CONFIG = "latent.json"
"""An optional file of ours in the model folder that resizes the VAE and the schedule (a reduced
model for tests); the published checkpoints need none."""


def local_config(model_dir: Path) -> tuple[VaeConfig, StreamConfig]:
    path = model_dir / LOCAL_CONFIG
    saved = json.loads(path.read_text()) if path.is_file() else {}
    vae, stream = saved.get("vae", {}), saved.get("stream", {})
    return VaeConfig(**_known(VaeConfig, vae)), StreamConfig(**_known(StreamConfig, stream))
