"""The latent family's modules against the official SoulX-FlashHead code, without its weights.

The fixtures (tests/fixtures/latent/, numbers only) were written by scripts/latent_fixtures.py
from the official code on seeded random weights of a reduced config; the manifest lists the
parameter names and shapes of the full-size official modules, which the published checkpoints
hold.
"""

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from engine.core.stage import AudioChunk
from engine.families.latent.audio import AudioEncoder, frame_windows, normalize
from engine.families.latent.checkpoint import CheckpointError, load_into
from engine.families.latent.config import (
    TINY_AUDIO,
    TINY_DIT,
    TINY_STREAM,
    TINY_VAE,
    AudioEncoderConfig,
    DitConfig,
    VaeConfig,
    folder_config,
)
from engine.families.latent.dit import FlashHeadDit
from engine.families.latent.vae import VideoVae
from engine.families.latent.weights import AUDIO_IGNORED, AUDIO_RENAMES

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parents[1] / "fixtures" / "latent"
TOLERANCE = 1e-4  # fp32, the bound


def fixture(name: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(FIXTURES / name), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def weights_of(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k.removeprefix("weight."): v for k, v in tensors.items() if k.startswith("weight.")}


def test_the_fixtures_were_made_with_the_configs_the_tests_build():
    for name, config in (("dit", TINY_DIT), ("audio", TINY_AUDIO), ("vae", TINY_VAE)):
        assert json.loads(fixture(f"{name}.safetensors")[1]["config"]) == json.loads(json.dumps(config.__dict__))


def test_dit_gives_the_official_flow_at_two_timesteps():
    tensors, _ = fixture("dit.safetensors")
    model = FlashHeadDit(TINY_DIT).eval()
    model.load_state_dict(weights_of(tensors), strict=True)
    for i in range(2):
        with torch.no_grad():
            out = model(tensors[f"input{i}.x"], tensors[f"input{i}.timestep"], tensors[f"input{i}.audio"],
                        tensors[f"input{i}.ref"])
        expected = tensors[f"output{i}"]
        assert out.shape == expected.shape
        assert (out - expected).abs().max().item() <= TOLERANCE, (out - expected).abs().max().item()
        assert expected.std() > 0.1  # the outputs carry signal: a zero model could not pass


def test_audio_encoder_gives_the_official_hidden_states_from_its_checkpoint_names():
    tensors, _ = fixture("audio.safetensors")
    model = AudioEncoder(TINY_AUDIO).eval()
    # the fixture holds transformers' names (weight norm as parametrizations), as a checkpoint can
    path = FIXTURES / "audio.safetensors"
    load_into(model, [path], prefix="weight.", renames=AUDIO_RENAMES, ignored=("input", "output", *AUDIO_IGNORED))
    pcm = tensors["input.pcm"][None]
    assert (normalize(pcm)[0] - tensors["input.normalized"]).abs().max() < 1e-5
    with torch.no_grad():
        out = model(normalize(pcm), frames=10)[0]
    expected = tensors["output"]
    assert out.shape == expected.shape == (10, TINY_AUDIO.num_hidden_layers, TINY_AUDIO.hidden_size)
    assert (out - expected).abs().max().item() <= TOLERANCE


def test_frame_windows_repeat_the_edges():
    features = torch.arange(4.0)[:, None, None]
    windows = frame_windows(features, 5)[..., 0, 0]
    assert windows.tolist() == [[0, 0, 0, 1, 2], [0, 0, 1, 2, 3], [0, 1, 2, 3, 3], [1, 2, 3, 3, 3]]


def shapes(module: torch.nn.Module) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in module.state_dict().items()}


def test_full_size_modules_have_the_official_checkpoints_names_and_shapes():
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    with torch.device("meta"):
        dit, audio, vae = FlashHeadDit(DitConfig()), AudioEncoder(AudioEncoderConfig()), VideoVae(VaeConfig())
    assert shapes(dit) == manifest["dit"]
    assert shapes(vae) == manifest["vae"]
    official_audio = {}
    for name, shape in manifest["audio"].items():
        for old, new in AUDIO_RENAMES.items():
            name = name.replace(old, new)
        if not name.startswith(AUDIO_IGNORED):
            official_audio[name] = shape
    assert shapes(audio) == official_audio
    assert sum(torch.Size(s).numel() for s in manifest["dit"].values()) > 1.3e9  # the 1.3B model


def test_a_model_folder_with_a_wrong_tensor_is_refused_by_name_and_shape(tmp_path):
    from safetensors.torch import save_file

    tensors, _ = fixture("dit.safetensors")
    weights = weights_of(tensors)
    weights["head.head.weight"] = weights["head.head.weight"][:-1].contiguous()
    save_file(weights, tmp_path / "diffusion_pytorch_model.safetensors")
    with pytest.raises(CheckpointError, match=r"head\.head\.weight has shape \(15, 48\), expected \(16, 48\)"):
        load_into(FlashHeadDit(TINY_DIT), [tmp_path / "diffusion_pytorch_model.safetensors"])
    del weights["head.head.weight"]
    save_file(weights, tmp_path / "diffusion_pytorch_model.safetensors")
    with pytest.raises(CheckpointError, match=r"lacks 1 tensors, e\.g\. head\.head\.weight \(16, 48\)"):
        load_into(FlashHeadDit(TINY_DIT), [tmp_path / "diffusion_pytorch_model.safetensors"])


def test_a_folder_config_sizes_the_dit(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"_class_name": "WanModelAudioProject", "dim": 64,
                                                       "num_layers": 3, "patch_size": [1, 2, 2]}))
    c = folder_config(DitConfig, tmp_path)
    assert (c.dim, c.num_layers, c.patch_size, c.ffn_dim) == (64, 3, (1, 2, 2), 8960)


def test_vae_encodes_and_decodes_as_the_official_one_and_streams_latent_by_latent():
    tensors, _ = fixture("vae.safetensors")
    model = VideoVae(TINY_VAE).eval()
    model.load_state_dict(weights_of(tensors), strict=True)
    video = tensors["input.video"]
    with torch.no_grad():
        latents = model.encode(video)
        boundary = model.encode(video[:, :, -5:])
        streamed = list(model.decode_stream(tensors["output.latents"]))
    for ours, name in ((latents, "latents"), (boundary, "boundary"), (torch.cat(streamed, 2), "frames")):
        expected = tensors[f"output.{name}"]
        assert ours.shape == expected.shape, name
        assert (ours - expected).abs().max().item() <= TOLERANCE, name
    assert [f.shape[2] for f in streamed] == [1, 4, 4]  # the first latent is one frame, each later one four
    for i, frames in enumerate(streamed):
        assert (frames - tensors[f"output.stream{i}"]).abs().max().item() <= TOLERANCE


def test_two_chunks_of_the_streaming_loop_give_the_official_frames_and_boundaries():
    """Sampler, boundary latents, streamed decode, colour matching and the re-encoded last frames,
    against FlashHeadPipeline.generate on the same weights, seed and audio."""
    from engine.families.latent.color import ColorMatch
    from engine.families.latent.models import place
    from engine.families.latent.stages import A2VStage, LatentSession, LatentWork, StreamDecodeStage
    from media.resample import MonoResampler

    tensors, _ = fixture("stream.safetensors")
    dit, vae = FlashHeadDit(TINY_DIT), VideoVae(TINY_VAE)
    dit.load_state_dict(weights_of(fixture("dit.safetensors")[0]))
    vae.load_state_dict(weights_of(fixture("vae.safetensors")[0]))
    models = place(dit, vae, AudioEncoder(TINY_AUDIO), TINY_STREAM, device="cpu")
    photo = tensors["input.photo"]
    with torch.no_grad():
        ref = vae.encode(photo.expand(-1, -1, TINY_STREAM.chunk_frames, -1, -1))
    assert (ref[0] - tensors["output.ref_latents"]).abs().max() <= TOLERANCE
    color = ColorMatch(photo)
    decode = StreamDecodeStage(models, color)
    a2v = A2VStage(models, ref, decode)
    state = LatentSession(audio=np.zeros(0, np.int16), resampler=MonoResampler(16000),
                          generator=torch.Generator().manual_seed(0),
                          boundary=ref[:, :, :1].clone(), last=np.zeros(0), held=0, ready=deque(maxlen=99),
                          tail=deque(maxlen=TINY_STREAM.boundary_frames))
    for i in range(2):
        a2v.run(LatentWork(AudioChunk(0, 2, np.zeros(0)), audio=tensors[f"input.audio{i}"]), state)
        assert state.generation is not None
        latents = state.generation.result()
        if i == 1:  # conditioned on chunk 0's last frames, as the official loop's motion latents
            assert (state.boundary[0] - tensors["output.boundary0"]).abs().max() <= TOLERANCE
        with torch.no_grad():
            video = torch.cat([color(f) for f in vae.decode_stream(latents)], 2)[0]
        assert (video - tensors[f"output.video{i}"]).abs().max() <= TOLERANCE, i
        decode.collect(state, wait=True)  # the live path: the stream that the next chunk's boundary comes from
