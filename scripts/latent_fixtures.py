"""Parity fixtures for the latent family, generated from the official SoulX-FlashHead code.

    python scripts/latent_fixtures.py --official /path/to/SoulX-FlashHead --out tests/fixtures/latent

Needs `transformers==4.57.3` (the official pin) and einops importable beside torch; nothing else
of the official requirements: diffusers' ModelMixin / ConfigMixin and xfuser's sequence-parallel
helpers are replaced by inert stand-ins (they only register configs and act when
torch.distributed is initialised), so the modules' arithmetic is the official code's own.

Writes numbers only (no official code): for each module a reduced config's seeded random
weights, inputs and the official outputs (fp32), and for the full-size modules the parameter
names and shapes the published checkpoints hold (tests/unit/test_latent_parity.py checks both).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import types
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine.families.latent.config import TINY_AUDIO, TINY_DIT, TINY_VAE, AudioEncoderConfig, DitConfig, VaeConfig  # noqa: E402  # noqa: E402

SEED = 0


def stub_modules() -> None:
    """diffusers and xfuser, as far as flash_head_model.py touches them outside distributed runs."""
    def module(name: str, **attrs) -> None:
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__dict__.update(attrs)

    module("diffusers", ModelMixin=nn.Module)
    module("diffusers.configuration_utils", ConfigMixin=object, register_to_config=lambda f: f)
    module("xfuser")
    module("xfuser.core")
    module("xfuser.core.distributed", get_sequence_parallel_rank=lambda: 0,
           get_sequence_parallel_world_size=lambda: 1, get_sp_group=None)
    module("xfuser.core.long_ctx_attention", xFuserLongContextAttention=None)
    module("loguru", logger=types.SimpleNamespace(info=print))


def load_official(root: Path, relative: str, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, root / relative)
    assert spec and spec.loader, f"{root / relative} not found"
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def seeded_weights(model: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Every tensor of the state dict from one generator, in name order: weights ~ 1/sqrt(fan in),
    norm scales near 1, biases and modulations small, so activations stay O(1) through the blocks."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in sorted(model.state_dict().items()):
        noise = torch.randn(t.shape, generator=g)
        if name.endswith("bias") or "modulation" in name:
            out[name] = 0.1 * noise
        elif t.dim() == 1 or "weight_g" in name or "original0" in name:
            out[name] = 1 + 0.1 * noise
        else:
            out[name] = noise / max(t[0].numel(), 1) ** 0.5
    model.load_state_dict(out)
    return out


def dit_config_kwargs(c: DitConfig) -> dict:
    return dict(dim=c.dim, in_dim=c.in_dim, ffn_dim=c.ffn_dim, out_dim=c.out_dim, text_dim=c.text_dim,
                freq_dim=c.freq_dim, eps=c.eps, vae_stride=c.vae_stride, patch_size=c.patch_size,
                num_heads=c.num_heads, num_layers=c.num_layers, has_image_input=False)


def official_dit(mod: types.ModuleType, c: DitConfig) -> nn.Module:
    """The official model; its audio adapter's sizes are constants there, so a reduced config
    swaps in the official adapter classes built at the reduced sizes."""
    model = mod.WanModelAudioProject(**dit_config_kwargs(c))
    if c != DitConfig():
        model.audio_emb = mod.MLP(c.audio_dim, c.dim)
        model.audio_proj = mod.AudioProjModel(
            seq_len=c.audio_window, seq_len_vf=c.audio_window + c.vae_stride[0] - 1, blocks=c.audio_layers,
            channels=c.audio_dim, intermediate_dim=c.audio_hidden, output_dim=c.dim,
            context_tokens=c.audio_tokens, norm_output_audio=True)
    return model.eval()


def dit_case(mod: types.ModuleType) -> dict[str, torch.Tensor]:
    c = TINY_DIT
    model = official_dit(mod, c)
    weights = seeded_weights(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    frames, h, w = 3, 6, 4  # an uneven grid, so rows and columns cannot be confused
    tensors = {f"weight.{k}": v for k, v in weights.items()}
    for i, t in enumerate((937.5, 250.0)):
        x = torch.randn(1, c.out_dim, frames, h, w, generator=g)
        ref = torch.randn(1, c.in_dim - c.out_dim, frames, h, w, generator=g)
        audio = torch.randn(1, 1 + c.vae_stride[0] * (frames - 1), c.audio_window, c.audio_layers, c.audio_dim,
                            generator=g)
        with torch.no_grad():
            out = model(x=x, timestep=torch.tensor([t]), context=audio, y=ref)
        tensors |= {f"input{i}.x": x, f"input{i}.ref": ref, f"input{i}.audio": audio,
                    f"input{i}.timestep": torch.tensor([t]), f"output{i}": out}
    return tensors


def official_vae(mod: types.ModuleType, c: VaeConfig) -> nn.Module:
    return mod.WanVAE_(dim=c.dim, z_dim=c.z_dim, dim_mult=list(c.dim_mult), num_res_blocks=c.num_res_blocks,
                       attn_scales=[], temperal_downsample=list(c.temporal_downsample)).eval()


def vae_case(mod: types.ModuleType) -> dict[str, torch.Tensor]:
    """Encode 9 frames and 5 (a chunk's boundary frames), decode the 9 frames' latents whole and
    latent by latent (official decode_stream)."""
    c = TINY_VAE
    model = official_vae(mod, c)
    weights = seeded_weights(model, SEED)
    scale = [torch.tensor(c.latent_mean), 1 / torch.tensor(c.latent_std)]
    g = torch.Generator().manual_seed(SEED + 3)
    video = torch.rand(1, 3, 9, 16, 24, generator=g) * 2 - 1
    with torch.no_grad():
        latents = model.encode(video, scale)
        boundary = model.encode(video[:, :, -5:], scale)
        frames = model.decode(latents, scale).clamp(-1, 1)
        model.clear_cache()
        streamed = [f.clamp(-1, 1) for f in model.decode_stream(latents, scale)]
    return {f"weight.{k}": v for k, v in weights.items()} | {
        "input.video": video, "output.latents": latents, "output.boundary": boundary, "output.frames": frames,
        **{f"output.stream{i}": f for i, f in enumerate(streamed)}}


def stream_case(root: Path, dit_mod: types.ModuleType, vae_mod: types.ModuleType) -> dict[str, torch.Tensor]:
    """Two chunks of the official streaming loop (FlashHeadPipeline.generate: the sampler, the
    boundary latents, decode, colour matching, the re-encoded last frames) on the tiny DiT and VAE
    with the same seeded weights as dit.safetensors and vae.safetensors."""
    from engine.families.latent.config import TINY_STREAM

    torch.cuda.synchronize = lambda *a, **k: None  # the official loop times itself with it
    for name in ("torchvision", "torchvision.transforms", "pyloudnorm"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["flash_head.utils.facecrop"] = types.ModuleType("facecrop")
    sys.modules["flash_head.utils.facecrop"].__dict__["process_image"] = None
    sys.path.insert(0, str(root))
    from flash_head.src.pipeline.flash_head_pipeline import FlashHeadPipeline, timestep_transform

    c, v, s = TINY_DIT, TINY_VAE, TINY_STREAM
    dit, vae_model = official_dit(dit_mod, c), official_vae(vae_mod, v)
    seeded_weights(dit, SEED)
    seeded_weights(vae_model, SEED)
    vae = object.__new__(vae_mod.WanVAE)  # the wrapper, around our tiny model instead of a file
    vae.model, vae.parallel, vae.use_tiling = vae_model, False, False
    vae.scale = [torch.tensor(v.latent_mean), 1 / torch.tensor(v.latent_std)]
    pipe = object.__new__(FlashHeadPipeline)
    pipe.model, pipe.vae, pipe.param_dtype, pipe.device, pipe.rank, pipe.model_type = dit, vae, torch.float32, \
        "cpu", 0, "pro"
    pipe.num_timesteps, pipe.config = 1000, types.SimpleNamespace(out_dim=c.out_dim, vae_stride=c.vae_stride)
    pipe.frame_num, pipe.motion_frames_num, pipe.color_correction_strength = s.chunk_frames, s.boundary_frames, 1.0
    pipe.lat_h = pipe.lat_w = s.head_size // c.vae_stride[1]
    pipe.generator = torch.Generator("cpu").manual_seed(SEED)
    pipe.timesteps = [timestep_transform(torch.tensor([t]), shift=s.shift) for t in [1000, 750, 500, 250, 0.0]]
    g = torch.Generator().manual_seed(SEED + 4)
    coarse = torch.rand(1, 3, 4, 4, generator=g) * 1.6 - 0.8  # a smooth photo: colour statistics to match
    photo = torch.nn.functional.interpolate(coarse, size=(s.head_size,) * 2, mode="bilinear")[:, :, None]
    pipe.original_color_reference = photo
    with torch.no_grad():
        pipe.ref_img_latent = vae.encode(photo.repeat(1, 1, s.chunk_frames, 1, 1))
        pipe.latent_motion_frames = pipe.ref_img_latent[:, :1].clone()
        out = {"input.photo": photo, "output.ref_latents": pipe.ref_img_latent}
        for i in range(2):
            audio = torch.randn(1, s.chunk_frames, c.audio_window, c.audio_layers, c.audio_dim, generator=g)
            out |= {f"input.audio{i}": audio, f"output.video{i}": pipe.generate(audio),
                    f"output.boundary{i}": pipe.latent_motion_frames.clone()}
    return out


def hf_audio_config(c: AudioEncoderConfig):
    from transformers import Wav2Vec2Config

    return Wav2Vec2Config(**{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(c).items()},
                          feat_extract_norm="group", conv_bias=False, do_stable_layer_norm=False)


def audio_case(root: Path) -> dict[str, torch.Tensor]:
    from transformers import Wav2Vec2FeatureExtractor

    sys.path.insert(0, str(root))
    from flash_head.audio_analysis.wav2vec2 import Wav2Vec2Model

    model = Wav2Vec2Model(hf_audio_config(TINY_AUDIO)).eval()
    weights = seeded_weights(model, SEED)
    g = torch.Generator().manual_seed(SEED + 2)
    t = torch.arange(6400) / 16000
    pcm = (0.3 * torch.sin(2 * torch.pi * 180 * t) * torch.sin(2 * torch.pi * 3 * t)
           + 0.05 * torch.randn(6400, generator=g)).numpy()
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True)
    values = torch.from_numpy(extractor(pcm, sampling_rate=16000).input_values[0]).float()[None]
    with torch.no_grad():
        hidden = model(values, seq_len=10, output_hidden_states=True).hidden_states
    out = torch.stack(hidden[1:], 1)[0].permute(1, 0, 2)  # [frames, layers, hidden], as the pipeline holds it
    return {f"weight.{k}": v for k, v in weights.items()} | {
        "input.pcm": torch.from_numpy(pcm).float(), "input.normalized": values[0], "output": out.contiguous()}


def manifest(dit_mod: types.ModuleType, vae_mod: types.ModuleType) -> dict:
    from transformers import Wav2Vec2Model

    with torch.device("meta"):
        dit = official_dit(dit_mod, DitConfig())
        vae = official_vae(vae_mod, VaeConfig())
        audio = Wav2Vec2Model(hf_audio_config(AudioEncoderConfig()))
    shapes = lambda m: {k: list(v.shape) for k, v in m.state_dict().items()}  # noqa: E731
    return {"dit": shapes(dit), "vae": shapes(vae), "audio": shapes(audio)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True, help="a checkout of Soul-AILab/SoulX-FlashHead")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/latent"))
    args = parser.parse_args()
    torch.manual_seed(SEED)
    stub_modules()
    mod = load_official(args.official, "flash_head/src/modules/flash_head_model.py", "official_flash_head_model")
    vae_mod = load_official(args.official, "flash_head/wan/modules/vae.py", "official_wan_vae")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"source": "Soul-AILab/SoulX-FlashHead", "seed": str(SEED)}
    save_file(dit_case(mod), args.out / "dit.safetensors", meta | {"config": json.dumps(asdict(TINY_DIT))})
    save_file(audio_case(args.official), args.out / "audio.safetensors",
              meta | {"config": json.dumps(asdict(TINY_AUDIO))})
    save_file(vae_case(vae_mod), args.out / "vae.safetensors", meta | {"config": json.dumps(asdict(TINY_VAE))})
    save_file(stream_case(args.official, mod, vae_mod), args.out / "stream.safetensors", meta)
    (args.out / "manifest.json").write_text(json.dumps(manifest(mod, vae_mod), indent=0) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
