"""GPU check: the observable cost of switching the device from one stage's model to the next
with per-block offload (goal: under 10 ms). Prints JSON; on a machine without CUDA it says so.

Two stage models of `--blocks` transformer-sized blocks live in pinned host memory. The
baseline runs stage B with its weights already on the GPU; the measured run brings B in
block by block (copy of block n+1 overlapping compute of block n). The difference is the
switch overhead.

    .venv/bin/python bench/gpu_offload.py [--blocks 24] [--dim 2048] [--tokens 4096]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.accel.offload import BlockOffloader  # noqa: E402


def make_blocks(n: int, dim: int) -> nn.ModuleList:
    return nn.ModuleList(nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
                         for _ in range(n)).to(torch.bfloat16)


def timed(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=4096)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device on this machine"}))
        return
    device = torch.device("cuda")
    x = torch.randn(args.tokens, args.dim, device=device, dtype=torch.bfloat16)
    stage_b = make_blocks(args.blocks, args.dim)
    resident = [b.to(device) for b in make_blocks(args.blocks, args.dim)]

    def run_resident():
        y = x
        for b in resident:
            y = b(y)
        return y

    offloader = BlockOffloader(stage_b, device)
    with torch.no_grad():
        run_resident(), offloader(x)  # warm-up
        base = timed(run_resident)
        switched = timed(lambda: offloader(x))
    weights_mb = sum(p.numel() * p.element_size() for p in stage_b.parameters()) / 2**20
    print(json.dumps({"device": torch.cuda.get_device_name(), "stage_weights_mb": round(weights_mb, 1),
                      "resident_forward_ms": round(base, 2), "offloaded_forward_ms": round(switched, 2),
                      "switch_overhead_ms": round(switched - base, 2), "goal_ms": 10,
                      "peak_resident_blocks": offloader.peak_resident}, indent=2))


if __name__ == "__main__":
    main()
