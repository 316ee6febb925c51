"""The latent family's three modules, placed on a device: loaded from `--model-dir`, or random.

On CUDA the weights are bf16; with `offload` the DiT's blocks stay in pinned host memory and
come to the GPU one by one with prefetch (engine/accel/offload.py), so the card holds two
blocks of the DiT at a time. On a CPU everything is fp32.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file

from engine.accel.offload import BlockOffloader

from .audio import AudioEncoder
from .config import (
    AUDIO_DIR,
    DIT_DIR,
    LOCAL_CONFIG,
    VAE_FILE,
    AudioEncoderConfig,
    DitConfig,
    StreamConfig,
    VaeConfig,
    local_config,
)
from .dit import FlashHeadDit
from .parallel import DitRanks
from .vae import VideoVae
from .weights import dtype_on, load_audio_encoder, load_dit, load_vae


@dataclass
class LatentModels:
    dit: FlashHeadDit
    vae: VideoVae
    audio: AudioEncoder
    stream: StreamConfig
    device: torch.device
    dtype: torch.dtype
    offloader: BlockOffloader | None = None
    ranks: DitRanks | None = None
    """With several GPUs: the DiT's steps run sequence parallel across them (parallel.py)."""
    sampler: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="latent-a2v"))
    """The one thread that generates chunks, in the background of the requests: the DiT (and its
    offloader's prefetch) serves one chunk at a time, whichever session or avatar it is for."""

    def flow(self, x: torch.Tensor, timestep: torch.Tensor, audio: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        """One DiT step, however the DiT is placed."""
        if self.ranks is not None:
            return self.ranks(x, timestep, audio, ref)
        return self.dit(x, timestep, audio, ref, run_blocks=self.offloader)


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def place(dit: FlashHeadDit, vae: VideoVae, audio: AudioEncoder, stream: StreamConfig, device: str = "auto",
          offload: bool = False) -> LatentModels:
    where = pick_device(device)
    dtype = dtype_on(where)
    offloader = None
    if offload:  # everything but the blocks goes to the device; the blocks stay on the host
        blocks = dit.blocks
        dit.blocks = torch.nn.ModuleList()
        dit.to(where, dtype)
        dit.blocks = blocks.to(dtype)
        offloader = BlockOffloader(dit.blocks, where)
    else:
        dit.to(where, dtype)
    # the VAE in the DiT's precision, as the official pipeline runs it; wav2vec2 in fp32, as it does too
    return LatentModels(dit.eval(), vae.to(where, dtype).eval(), audio.to(where).eval(), stream, where, dtype,
                        offloader)


def load_models(model_dir: Path, device: str = "auto", offload: bool = False, ranks: int = 1) -> LatentModels:
    """The published checkpoints under `model_dir` (config.MODEL_LAYOUT); with `ranks` > 1 the
    DiT runs sequence parallel over that many GPUs (or CPU processes), this process rank 0."""
    vae_config, stream = local_config(model_dir)
    vae = load_vae(model_dir, vae_config)
    models = place(load_dit(model_dir), vae, load_audio_encoder(model_dir), stream, device, offload)
    if ranks > 1:
        models.ranks = DitRanks(models.dit, model_dir, ranks, models.device)
    return models


def write_random_model(folder: Path, dit: DitConfig, vae: VaeConfig, audio: AudioEncoderConfig,
                       stream: StreamConfig, seed: int = 0) -> Path:
    """A model folder in the published layout with seeded random weights (tests and benchmarks)."""
    torch.manual_seed(seed)
    (folder / DIT_DIR).mkdir(parents=True, exist_ok=True)
    (folder / VAE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (folder / AUDIO_DIR).mkdir(parents=True, exist_ok=True)
    save_file(FlashHeadDit(dit).state_dict(), folder / DIT_DIR / "diffusion_pytorch_model.safetensors")
    (folder / DIT_DIR / "config.json").write_text(json.dumps({"_class_name": "WanModelAudioProject", **asdict(dit)}))
    torch.save(VideoVae(vae).state_dict(), folder / VAE_FILE)
    encoder = AudioEncoder(audio).state_dict()
    save_file({f"wav2vec2.{k}": v for k, v in encoder.items()}, folder / AUDIO_DIR / "model.safetensors")
    (folder / AUDIO_DIR / "config.json").write_text(json.dumps(asdict(audio)))
    if (vae, stream) != (VaeConfig(), StreamConfig()):
        (folder / LOCAL_CONFIG).write_text(json.dumps({"vae": asdict(vae), "stream": asdict(stream)}))
    return folder
