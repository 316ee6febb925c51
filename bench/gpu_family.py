"""The latent family at full size on a GPU, with random bf16 weights (no download needed).

Prints JSON: frames per second of one session at 512x512 (generation and streamed decode back
to back) and streamed at 1280x720 (the head pasted back), how long a chunk takes to generate in
the background against the lead it gets, the first generated frame's time, the sessions one GPU
keeps at 25 fps (sessions interleaved request by request, as a worker serves them), peak memory after
chunk 10 and chunk 100, and with --offload the cost per DiT step of streaming its blocks from
host memory against the same step with them resident, and with --dit-gpus N a step split over N
GPUs (sequence parallel) against one GPU's. Baseline in the same run: the CPU
portrait family on the same audio. On a machine without CUDA it says so and stops, unless
--tiny asks for the reduced model on the CPU (a check that the script itself runs).

    .venv/bin/python bench/gpu_family.py [--chunks 100] [--offload] [--dit-gpus 2] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.config import FPS, SAMPLES_PER_FRAME, EngineConfig  # noqa: E402
from engine.core.stage import AudioChunk  # noqa: E402
from engine.families.latent import config as lc  # noqa: E402
from engine.families.latent.audio import AudioEncoder  # noqa: E402
from engine.families.latent.dit import FlashHeadDit  # noqa: E402
from engine.families.latent.models import LatentModels, load_models, place, write_random_model  # noqa: E402
from engine.families.latent.pipeline import latent_pipeline  # noqa: E402
from engine.families.latent.vae import VideoVae  # noqa: E402
from engine.families.portrait.avatar import DEFAULT_AVATAR  # noqa: E402

STEP = EngineConfig().chunk_frames
WIDE = (1280, 720)  # the head pasted into the photo's surroundings (engine/families/latent/paste.py)


def random_models(tiny: bool, offload: bool) -> LatentModels:
    device = "cpu" if tiny else "cuda"
    configs = (lc.TINY_DIT, lc.TINY_VAE, lc.TINY_AUDIO, lc.TINY_STREAM) if tiny else \
        (lc.DitConfig(), lc.VaeConfig(), lc.AudioEncoderConfig(), lc.StreamConfig())
    build = torch.device("cpu" if tiny or offload else device)  # offloaded blocks are made on the host
    with build:
        dit, vae, audio = FlashHeadDit(configs[0]), VideoVae(configs[1]), AudioEncoder(configs[2])
    return place(dit, vae, audio, configs[3], device, offload)


def speech(frames: int, seed: int = 0) -> np.ndarray:
    """Loud, varied noise bursts: the DiT's cost does not depend on what it hears."""
    rng = np.random.default_rng(seed)
    envelope = np.repeat(rng.uniform(0, 1, frames), SAMPLES_PER_FRAME)
    return (rng.standard_normal(frames * SAMPLES_PER_FRAME) * 6000 * envelope).astype(np.int16)


def sync(models: LatentModels) -> None:
    if models.device.type == "cuda":
        torch.cuda.synchronize()


def run_sessions(pipeline, models: LatentModels, sessions: int, chunks: int) -> dict:
    """`sessions` interleaved, request by request; wall time per frame and each chunk's generation."""
    states = [pipeline.new_state(seed) for seed in range(sessions)]
    first = states[0].stages["context"]
    new = models.stream.new_frames
    pcm = speech(new * chunks)
    memory, generation_s = [], []
    sync(models)
    start = time.perf_counter()
    for k in range(new * chunks // STEP):
        audio = pcm[k * STEP * SAMPLES_PER_FRAME:(k + 1) * STEP * SAMPLES_PER_FRAME]
        for state in states:
            pipeline.render(AudioChunk(k * STEP, STEP, audio), state)
        if (k + 1) % (new // STEP) == 0 and models.device.type == "cuda":
            memory.append(torch.cuda.max_memory_allocated() / 2**20)
        # the request before a chunk is due: the chunk before it has been decoded (so generated),
        # read without waiting on the sampler, which would take away the overlap being measured
        if (k + 2) % (new // STEP) == 0 and k > new // STEP:
            generation_s.append(first.generation_s)
    sync(models)
    elapsed = time.perf_counter() - start
    frames = new * chunks * sessions
    return {"fps_total": frames / elapsed, "fps_per_session": frames / elapsed / sessions,
            "generation_s": generation_s, "peak_mb": memory}


def dit_step_ms(models: LatentModels) -> float:
    """One DiT forward over a chunk's latents as the models are placed: blocks resident, streamed
    from the host (models.offloader), or split over several GPUs (models.ranks)."""
    c, s = models.dit.config, models.stream
    side = s.head_size // c.vae_stride[1]
    frames = (s.chunk_frames - 1) // s.temporal_stride + 1
    x = torch.randn(1, c.out_dim, frames, side, side, device=models.device, dtype=models.dtype)
    audio = torch.randn(1, s.chunk_frames, c.audio_window, c.audio_layers, c.audio_dim, device=models.device,
                        dtype=models.dtype)
    t = torch.tensor([900.0], device=models.device)
    with torch.inference_mode():
        for _ in range(2):
            models.flow(x, t, audio, x)
        sync(models)
        start = time.perf_counter()
        for _ in range(3):
            models.flow(x, t, audio, x)
        sync(models)
    return (time.perf_counter() - start) / 3 * 1000


def cpu_baseline_fps(seconds: int = 4) -> float | str:
    """The CPU portrait family on the same audio (what the device's own packages allow)."""
    try:
        from engine.assembly import pipeline_for

        pipeline = pipeline_for(DEFAULT_AVATAR)
    except Exception as exc:  # noqa: BLE001 - a GPU image without the CPU family's packages
        return f"unavailable: {type(exc).__name__}: {exc}"
    state, pcm = pipeline.new_state(0), speech(seconds * FPS)
    start = time.perf_counter()
    for k in range(seconds * FPS // STEP):
        piece = pcm[k * STEP * SAMPLES_PER_FRAME:(k + 1) * STEP * SAMPLES_PER_FRAME]
        pipeline.render(AudioChunk(k * STEP, STEP, piece), state)
    return seconds * FPS / (time.perf_counter() - start)


def rounded(value: float | str) -> float | str:
    return round(value, 1) if isinstance(value, float) else value


def sessions_at_25(pipeline, models: LatentModels, single_fps: float) -> int:
    held = 0
    for n in range(1, max(1, int(single_fps // FPS)) + 2):
        if run_sessions(pipeline, models, n, chunks=4)["fps_per_session"] < FPS:
            break
        held = n
    return held


def split_step(tiny: bool, ranks: int, resident: float) -> dict:
    """A DiT step sequence parallel over `ranks` GPUs (CPU processes with --tiny), beside one GPU's."""
    if not tiny and torch.cuda.device_count() < ranks:
        return {"dit_step_ms_split": f"skipped: {torch.cuda.device_count()} GPUs"}
    configs = (lc.TINY_DIT, lc.TINY_VAE, lc.TINY_AUDIO, lc.TINY_STREAM) if tiny else \
        (lc.DitConfig(), lc.VaeConfig(), lc.AudioEncoderConfig(), lc.StreamConfig())
    with tempfile.TemporaryDirectory() as folder:  # the helper ranks load the DiT from a folder
        models = load_models(write_random_model(Path(folder), *configs), "cpu" if tiny else "cuda", ranks=ranks)
        try:
            split = dit_step_ms(models)
        finally:
            assert models.ranks is not None
            models.ranks.close()
    return {"dit_gpus": ranks, "dit_step_ms_split": round(split, 2), "split_speedup": round(resident / split, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--offload", action="store_true", help="also measure the DiT with its blocks offloaded")
    parser.add_argument("--tiny", action="store_true", help="the reduced model on the CPU (checks the script)")
    parser.add_argument("--dit-gpus", type=int, default=1, help="also time a DiT step split over this many GPUs")
    args = parser.parse_args()
    if not args.tiny and not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device on this machine (--tiny runs the reduced model on the CPU)"}))
        return
    models = random_models(args.tiny, offload=False)
    pipeline = latent_pipeline(DEFAULT_AVATAR, models, EngineConfig().size)
    one = run_sessions(pipeline, models, 1, args.chunks)
    peaks, generation = one.pop("peak_mb"), one.pop("generation_s")
    lead_s = models.stream.generation_lead / FPS
    out = {"device": torch.cuda.get_device_name() if models.device.type == "cuda" else "cpu (tiny model)",
           "head": models.stream.head_size, "fps": round(one["fps_total"], 1),
           "generation_s_first": round(generation[0], 3), "generation_s_median": round(float(np.median(generation)), 3),
           "generation_lead_s": lead_s, "chunks_generated_within_lead": sum(g <= lead_s for g in generation),
           "chunks_timed": len(generation),  # unpaced requests run past any lead: the sampler's time tells
           # the first generated frame is due after the delay; a generation past its lead holds it back
           "first_generated_frame_s": round(models.stream.delay_frames / FPS + max(0.0, generation[0] - lead_s), 3),
           "sessions_at_25fps": sessions_at_25(pipeline, models, one["fps_total"]),
           "fps_1280x720": round(run_sessions(latent_pipeline(DEFAULT_AVATAR, models, WIDE), models, 1,
                                              min(args.chunks, 20))["fps_total"], 1),
           "baseline_cpu_portrait_fps": rounded(cpu_baseline_fps())}
    if peaks:
        out |= {"peak_mb_chunk10": round(peaks[min(9, len(peaks) - 1)], 1), "peak_mb_last": round(peaks[-1], 1)}
    resident = dit_step_ms(models)
    out["dit_step_ms_resident"] = round(resident, 2)
    if args.dit_gpus > 1:
        out |= split_step(args.tiny, args.dit_gpus, resident)
    if args.offload:
        offloaded = random_models(args.tiny, offload=True)
        streamed = dit_step_ms(offloaded)
        out |= {"dit_step_ms_offloaded": round(streamed, 2), "switch_overhead_ms": round(streamed - resident, 2),
                "switch_goal_ms": 10}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
