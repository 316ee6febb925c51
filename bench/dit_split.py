"""Two ways to put one DiT step on two devices, timed on two CPU processes (gloo).

Prints JSON: one DiT forward over a chunk's latents by one process (the baseline), by two ranks
sequence parallel (engine/families/latent/parallel.py: each rank half of every frame's tokens)
and by two ranks under FSDP (engine/accel/offload.py's `shard`: each rank half of the weights).
Each process uses one thread, so two ranks have twice the compute of the baseline. A reduced
DiT (dim 384, 4 blocks) over 9 latent frames of 32 x 32 (2,304 tokens, a 256-px head) keeps it
to a minute; the choice it informs is which split the latent family uses across GPUs.

    .venv/bin/python bench/dit_split.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.families.latent.config import TINY_DIT  # noqa: E402
from engine.families.latent.dit import FlashHeadDit  # noqa: E402
from testkit.ranks import two_ranks  # noqa: E402

CONFIG = replace(TINY_DIT, dim=384, ffn_dim=1536, num_heads=4, num_layers=4)
SIDE = 32  # latent side: 16 x 16 tokens a frame


def inputs() -> list[torch.Tensor]:
    g, c = torch.Generator().manual_seed(1), CONFIG
    x = torch.randn(1, c.in_dim // 2, 9, SIDE, SIDE, generator=g)
    audio = torch.randn(1, 33, c.audio_window, c.audio_layers, c.audio_dim, generator=g)
    return [x, torch.tensor([750.0]), audio, torch.randn(x.shape, generator=g)]


def step_ms(step: Callable[[], torch.Tensor], repeats: int = 3) -> float:
    step()  # warm
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats * 1000


def dit() -> FlashHeadDit:
    torch.manual_seed(0)
    return FlashHeadDit(CONFIG).eval()


def rank(r: int, port: int, out, how: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    try:
        model = dit()
        with torch.inference_mode() if how == "sequence" else torch.no_grad():
            if how == "sequence":
                from engine.families.latent.parallel import SequenceParallel

                split = SequenceParallel(model.blocks, CONFIG.num_heads)
                out[r] = step_ms(lambda: model(*inputs(), run_blocks=split))
            else:
                from torch.distributed.device_mesh import init_device_mesh

                from engine.accel.offload import shard

                sharded = shard(model.blocks, model, init_device_mesh("cpu", (2,)))
                out[r] = step_ms(lambda: sharded(*inputs()))
    finally:
        dist.destroy_process_group()


def main() -> None:
    torch.set_num_threads(1)
    model = dit()
    with torch.inference_mode():
        one = step_ms(lambda: model(*inputs()))
    sequence, fsdp = (float(two_ranks(rank, how)[0]) for how in ("sequence", "fsdp"))
    print(json.dumps({"tokens": 9 * (SIDE // 2) ** 2, "baseline_one_rank_ms": round(one, 1),
                      "sequence_parallel_two_ranks_ms": round(sequence, 1), "fsdp_two_ranks_ms": round(fsdp, 1),
                      "sequence_speedup": round(one / sequence, 2), "fsdp_speedup": round(one / fsdp, 2)}, indent=2))


if __name__ == "__main__":
    main()
