"""The latent family's chunk loop on a tiny random model, loaded from a folder in the published layout."""

import logging
import threading

import numpy as np
import psutil
import pytest

from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.core.stage import AudioChunk
from engine.families.latent.checkpoint import CheckpointError
from engine.families.latent.config import TINY_AUDIO, TINY_DIT, TINY_STREAM, TINY_VAE, VAE_FILE
from engine.families.latent.models import load_models, write_random_model
from engine.families.latent.pipeline import latent_pipeline
from engine.families.latent.stages import LatentSession, timesteps
from engine.families.motion.delay import picture_delay_frames
from engine.families.portrait.avatar import DEFAULT_AVATAR
from server.config import ConfigError, ServerConfig

pytestmark = pytest.mark.unit

STEP = 2  # frames per request, as the server sends them
NEW = TINY_STREAM.new_frames
LEAD = TINY_STREAM.generation_lead
DELAY = TINY_STREAM.delay_frames


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("latent"), TINY_DIT, TINY_VAE, TINY_AUDIO, TINY_STREAM)


@pytest.fixture(scope="module")
def pipeline(model_dir):
    return latent_pipeline(DEFAULT_AVATAR, load_models(model_dir), size=128)


def speech(k: int) -> np.ndarray:
    rng = np.random.default_rng(k)
    return (rng.standard_normal(STEP * SAMPLES_PER_FRAME) * 3000).astype(np.int16)


def session_bytes(s: LatentSession) -> int:
    settled(s)
    tensors = [s.boundary, *s.tail]
    return s.audio.nbytes + sum(t.numel() * t.element_size() for t in tensors) + sum(f.nbytes for f in s.ready)


def settled(s: LatentSession) -> None:
    """Waits for a chunk being generated: the sampler thread writes its boundary."""
    if s.generation is not None:
        s.generation.result()


def test_the_schedule_is_the_official_one():
    # flash_head_pipeline.py: [1000, 750, 500, 250, 0], shifted by 5
    assert np.allclose(timesteps(4, 5.0), [1.0, 0.9375, 5 / 6, 0.625, 0.0])


def test_frames_lag_their_audio_by_a_chunk_and_the_lead_and_leave_before_the_chunk_is_decoded(pipeline):
    state = pipeline.new_state(seed=0)
    session: LatentSession = state.stages["context"]
    outputs = [pipeline.render(AudioChunk(k * STEP, STEP, speech(k)), state).frames for k in range(DELAY // STEP)]
    assert outputs[0].shape == (STEP, 128 * 3 // 2, 128)
    held = np.concatenate(outputs)
    assert (held == held[0]).all(), "until the delay has passed, the photo is held"
    first = pipeline.render(AudioChunk(DELAY, STEP, speech(DELAY // STEP)), state).frames
    assert not (first == held[0]).all(), "then the first chunk's first frames"
    assert session.latents_decoded == 3, "published after decoding 3 of its 9 latents, not all of them"
    for k in range(DELAY // STEP + 1, 2 * NEW // STEP + LEAD // STEP):
        pipeline.render(AudioChunk(k * STEP, STEP, speech(k)), state)
    settled(session)
    assert session.boundary.shape[2] == TINY_STREAM.boundary_latents, "the second chunk starts from re-encoded frames"


def test_a_chunk_is_generated_in_the_background_while_the_last_one_plays(model_dir):
    models = load_models(model_dir)
    pipeline = latent_pipeline(DEFAULT_AVATAR, models, size=128)
    gate, entered, sample = threading.Event(), threading.Event(), models.dit.forward

    def gated(*args, **kwargs):
        entered.set()
        assert gate.wait(60), "the test never opened the gate"
        return sample(*args, **kwargs)

    models.dit.forward = gated  # type: ignore[method-assign]
    state = pipeline.new_state(seed=3)
    session: LatentSession = state.stages["context"]
    for k in range(DELAY // STEP):  # the first chunk's audio completes at NEW; its frames are due at DELAY
        photo = pipeline.render(AudioChunk(k * STEP, STEP, speech(k)), state).frames[0]
        if k == NEW // STEP - 1:
            assert entered.wait(60), "the chunk was handed to the sampler when its audio was complete"
    assert session.generation is not None and not session.generation.done(), \
        "every request of the lead returned while the DiT was still held"
    gate.set()
    frames = pipeline.render(AudioChunk(DELAY, STEP, speech(DELAY // STEP)), state).frames
    assert session.generation is None and not (frames == photo).all(), "its frames came when they were due"
    assert session.generation_s > 0


def test_a_generation_slower_than_its_lead_holds_the_stream_and_says_so(model_dir, caplog):
    models = load_models(model_dir)
    pipeline = latent_pipeline(DEFAULT_AVATAR, models, size=128)
    gate, sample = threading.Event(), models.dit.forward
    models.dit.forward = lambda *a, **k: (gate.wait(60), sample(*a, **k))[1]  # type: ignore[method-assign]
    state = pipeline.new_state(seed=4)
    session: LatentSession = state.stages["context"]
    for k in range(DELAY // STEP):
        pipeline.render(AudioChunk(k * STEP, STEP, speech(k)), state)

    class OpenOnWarning(logging.Handler):  # the due request finds the chunk unfinished, says so, then waits
        def emit(self, record: logging.LogRecord) -> None:
            gate.set()

    opener = OpenOnWarning(logging.WARNING)
    logging.getLogger("engine.latent").addHandler(opener)
    try:
        with caplog.at_level("WARNING", logger="engine.latent"):
            pipeline.render(AudioChunk(DELAY, STEP, speech(DELAY // STEP)), state)
    finally:
        logging.getLogger("engine.latent").removeHandler(opener)
    assert session.overruns == 1 and session.generation is None
    assert "not generated within its lead of 8 frames" in caplog.text


def test_memory_is_flat_over_100_chunks(pipeline):
    state = pipeline.new_state(seed=1)
    session: LatentSession = state.stages["context"]
    process = psutil.Process()
    sizes, rss = [], []
    for k in range(100 * NEW // STEP):
        pipeline.render(AudioChunk(k * STEP, STEP, speech(k)), state)
        if (k + 1) % (NEW // STEP) == 0:
            sizes.append(session_bytes(session))
            rss.append(process.memory_info().rss)
    assert len(set(sizes[1:])) == 1, "the session holds the same bytes after every chunk"
    # the allocator moves RSS by +-3 % from chunk to chunk here, with no trend over 300 chunks:
    # compare the medians of chunks 10-40 and 70-100
    early, late = np.median(rss[10:40]), np.median(rss[70:100])
    assert late < 1.02 * early, f"memory grew from {early / 2**20:.1f} to {late / 2**20:.1f} MB"


def test_a_folder_without_the_vae_is_refused_by_name(model_dir, tmp_path):
    import shutil

    copy = shutil.copytree(model_dir, tmp_path / "model")
    (copy / VAE_FILE).unlink()
    with pytest.raises(CheckpointError, match="Wan2.1_VAE.pth is missing"):
        load_models(copy)
    with pytest.raises(ConfigError, match="model_dir lacks .*Wan2.1_VAE.pth"):
        ServerConfig(family="latent", model_dir=str(copy))
    with pytest.raises(ConfigError, match="family = latent needs 'model_dir'"):
        ServerConfig(family="latent")
    with pytest.raises(ConfigError, match="'family' must be one of cpu, latent"):
        ServerConfig(family="gpu")


@pytest.mark.parametrize("frame,message", [
    ("1280x", "WIDTHxHEIGHT in even pixels"),
    ("wide", "WIDTHxHEIGHT in even pixels"),
    ("1281x720", "WIDTHxHEIGHT in even pixels"),
    ("64x64", "each side 128-3840"),
    ("3840x720", "narrower than 4:1"),
])
def test_a_bad_frame_size_is_refused_by_name(model_dir, frame, message):
    with pytest.raises(ConfigError, match=message):
        ServerConfig(family="latent", model_dir=str(model_dir), frame=frame)


def test_a_wide_frame_is_the_latent_familys_alone(model_dir):
    assert ServerConfig(family="latent", model_dir=str(model_dir), frame="1280X720").frame_size == (1280, 720)
    with pytest.raises(ConfigError, match="'frame' needs family = latent"):
        ServerConfig(frame="1280x720")


def test_a_dit_split_over_gpus_is_the_latent_familys_alone_and_needs_no_offload(model_dir):
    assert ServerConfig(family="latent", model_dir=str(model_dir), dit_gpus=2).dit_gpus == 2
    for wrong in ({}, {"family": "latent", "model_dir": str(model_dir), "offload": 1},
                  {"family": "latent", "model_dir": str(model_dir), "dit_gpus": 0}):
        with pytest.raises(ConfigError, match="'dit_gpus' must be 1"):
            ServerConfig(**{"dit_gpus": 2, **wrong})


def test_the_server_delays_sound_by_the_frames_a_generation_adds(model_dir):
    assert picture_delay_frames(EngineConfig(family="latent", model_dir=str(model_dir))) == DELAY == 28 + 8


def test_dit_with_offloaded_blocks_gives_the_same_flow():
    import copy

    import torch

    from engine.families.latent.audio import AudioEncoder
    from engine.families.latent.dit import FlashHeadDit
    from engine.families.latent.models import place
    from engine.families.latent.vae import VideoVae

    torch.manual_seed(0)
    dit = FlashHeadDit(TINY_DIT).eval()
    x, ref = torch.randn(1, 4, 3, 4, 4), torch.randn(1, 4, 3, 4, 4)
    audio = torch.randn(1, 9, 5, TINY_DIT.audio_layers, TINY_DIT.audio_dim)
    t = torch.tensor([900.0])
    offloaded = place(copy.deepcopy(dit), VideoVae(TINY_VAE), AudioEncoder(TINY_AUDIO), TINY_STREAM, "cpu",
                      offload=True)
    assert offloaded.offloader is not None and len(offloaded.dit.blocks) == TINY_DIT.num_layers
    with torch.no_grad():
        plain = dit(x, t, audio, ref)
        streamed = offloaded.dit(x, t, audio, ref, run_blocks=offloaded.offloader)
    assert torch.equal(plain, streamed)
    assert offloaded.offloader.peak_resident == 2  # a block computes while the next one arrives


def test_each_engine_worker_sees_its_own_gpu():
    from engine.runtime.entry import visible_gpu

    assert [visible_gpu(i, 4, {}) for i in range(5)] == ["0", "1", "2", "3", "0"]
    assert visible_gpu(1, 1, {}) is None  # one device: nothing to choose
    assert visible_gpu(1, 4, {"CUDA_VISIBLE_DEVICES": "2"}) is None  # chosen by the operator or Ray
    assert [visible_gpu(i, 4, {}, per_worker=2) for i in range(2)] == ["0,1", "2,3"]  # a DiT over two GPUs


def test_a_carried_decode_cache_decodes_only_the_new_latents_and_holds_no_frame(model_dir):
    from dataclasses import replace

    models = load_models(model_dir)
    models = replace(models, stream=replace(models.stream, carry_decode_cache=True))
    pipeline = latent_pipeline(DEFAULT_AVATAR, models, size=128)
    state = pipeline.new_state(seed=2)
    session: LatentSession = state.stages["context"]
    frames, caches, decoded = [], [], []
    for k in range(4 * NEW // STEP):
        frames.extend(pipeline.render(AudioChunk(k * STEP, STEP, speech(k)), state).frames)
        if (k + 1) % (NEW // STEP) == 0 and k > NEW // STEP:
            caches.append(session.cache)
        if (k + 2) % (NEW // STEP) == 0 and k > NEW // STEP:  # the request before a chunk is due
            pipeline.stages[2].finish(session)
            decoded.append(session.latents_decoded)
    # the first chunk decodes all 9 latents (its boundary is the photo), each later one 9 - 2
    assert decoded == [9, 9 - TINY_STREAM.boundary_latents, 9 - TINY_STREAM.boundary_latents]
    assert all(c is caches[0] for c in caches), "one cache, carried"
    later = frames[DELAY:]
    assert all((a != b).any() for a, b in zip(later, later[1:])), "no frame held between chunks"
