"""Block offload (host-resident weights, prefetch) and 2-process FSDP on gloo, against plain models."""

import os

import pytest
import torch
from torch import nn

from engine.accel.offload import BlockOffloader, shard
from testkit.ranks import two_ranks

pytestmark = pytest.mark.unit


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Tiny(nn.Module):
    def __init__(self, dim: int = 16, depth: int = 5):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_offload_matches_the_plain_model_bit_for_bit_with_two_blocks_resident():
    torch.manual_seed(0)
    model, x = Tiny(), torch.randn(3, 7, 16)
    trace = []
    offload = BlockOffloader(model.blocks, "cpu", trace=lambda op, i: trace.append((op, i)))
    with torch.no_grad():
        assert torch.equal(offload(x), model(x))
    assert offload.peak_resident == 2 and not offload.resident
    expected = [("copy", 0)]
    for i in range(5):
        expected += ([("copy", i + 1)] if i + 1 < 5 else []) + [("compute", i), ("free", i)]
    assert trace == expected  # n+1's copy is issued before n computes; n is freed right after


def _sharded_rank(rank: int, port: int, results) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model, x = Tiny(), torch.randn(3, 7, 16)
        with torch.no_grad():
            expected = model(x)
            sharded = shard(model.blocks, model, init_device_mesh("cpu", (2,)))
            local = next(iter(sharded.blocks[0].parameters())).to_local().numel()
            out = sharded(x)
        results[rank] = (torch.equal(out, expected), local)
    finally:
        dist.destroy_process_group()


def test_two_process_fsdp_on_gloo_matches_the_unsharded_model():
    results = two_ranks(_sharded_rank)
    assert results[0][0] and results[1][0], "sharded output differs from the plain model"
    full = Tiny().blocks[0].norm.weight.numel()
    assert results[0][1] == full // 2  # each rank holds half of the first parameter
