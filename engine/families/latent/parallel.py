"""Sequence parallel DiT: one chunk's patch tokens split across GPUs (Ulysses attention).

Every rank holds the whole DiT and the same share of each latent frame's patch tokens. Per
token the blocks need nothing from other ranks (the norms, the adaLN modulation, the feed-
forward, and the cross-attention, where a frame's tokens hear that frame's audio). Self-
attention needs every token: two all-to-alls turn "my tokens, all heads" into "all tokens, my
heads" and back, so each rank attends over the whole chunk for heads / ranks of the heads.
The tokens are gathered after the last block; the head and the sampler run on each rank as
before (only rank 0's result is used).

Why this rather than FSDP (engine/accel/offload.py: `shard`): FSDP splits the weights, but every
GPU still computes every token of every block and gathers each block's weights at every step,
so a chunk takes no less time. Splitting the tokens splits each step's compute by the number of
ranks, for two all-to-alls of one block's activations; SoulX-FlashHead's authors reach real time
on two GPUs this way (through xfuser). The 1.3B model fits one GPU in bf16, so memory is not
what a second GPU is for. On two CPU processes (bench/dit_split.py): x1.51 sequence parallel,
x0.95 under FSDP; not yet measured on GPUs (bench/gpu_family.py --dit-gpus 2).

`DitRanks` starts ranks 1.. as processes of their own, each loading the DiT from the model folder
onto its GPU (or, on a CPU, gloo ranks: what the tests run), and makes rank 0's forward a
broadcast of the inputs followed by its share of the work.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .dit import FlashHeadDit

STOP = -1  # a header whose first field (the inputs' count) is this ends a helper rank
DIMS = 5  # the most dimensions of an input
HEADER = 1 + 4 * (2 + DIMS)  # the count, then per input: its dtype's code, its dimensions, its shape
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


class SequenceParallel:
    """`run_blocks` for FlashHeadDit.forward across `group`: each rank keeps its share of every
    frame's tokens through the blocks, and all ranks get all the tokens back."""

    def __init__(self, blocks: nn.ModuleList, heads: int, group: dist.ProcessGroup | None = None):
        self.blocks, self.group = blocks, group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        if heads % self.world:
            raise ValueError(f"the DiT's {heads} heads do not split over {self.world} ranks")

    def __call__(self, tokens: torch.Tensor, context: torch.Tensor, t_mod: torch.Tensor,
                 cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        frames = context.shape[1]
        if (per_frame := tokens.shape[1] // frames) % self.world:
            raise ValueError(f"a latent frame's {per_frame} tokens do not split over {self.world} ranks")
        x = self.share(tokens, frames)
        cos, sin = self.share(cos[None], frames)[0], self.share(sin[None], frames)[0]
        for block in self.blocks:
            x = block(x, context, t_mod, cos, sin, attend=self.attend)
        return self.gather(x, frames)

    def share(self, t: torch.Tensor, frames: int) -> torch.Tensor:
        """This rank's share of each frame's tokens: [b, f l, ...] -> [b, f l / ranks, ...]."""
        return _grouped(t, frames).chunk(self.world, 2)[self.rank].flatten(1, 2)

    def gather(self, x: torch.Tensor, frames: int) -> torch.Tensor:
        parts = [torch.empty_like(x) for _ in range(self.world)]
        dist.all_gather(parts, x.contiguous(), group=self.group)
        return torch.cat([_grouped(p, frames) for p in parts], 2).flatten(1, 2)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
        """Self-attention over every rank's tokens: q, k, v [b, my tokens, heads * d]."""
        q, k, v = (self._all_tokens(t, heads).transpose(1, 2) for t in (q, k, v))
        # the keys arrive rank by rank rather than in the chunk's order: attention does not mind
        return self._my_tokens(F.scaled_dot_product_attention(q, k, v).transpose(1, 2))

    def _all_tokens(self, t: torch.Tensor, heads: int) -> torch.Tensor:
        """[b, my tokens, heads * d] -> [b, all tokens, my heads, d]."""
        b, s, _ = t.shape
        send = t.reshape(b, s, self.world, heads // self.world, -1).permute(2, 0, 1, 3, 4).contiguous()
        got = torch.empty_like(send)
        dist.all_to_all_single(got, send, group=self.group)  # got[i]: rank i's tokens, my heads
        return got.permute(1, 0, 2, 3, 4).flatten(1, 2)

    def _my_tokens(self, out: torch.Tensor) -> torch.Tensor:
        """[b, all tokens, my heads, d] -> [b, my tokens, heads * d]."""
        send = _grouped(out, self.world).permute(1, 0, 2, 3, 4).contiguous()  # [ranks, b, my tokens, ...]
        got = torch.empty_like(send)
        dist.all_to_all_single(got, send, group=self.group)  # got[i]: my tokens, rank i's heads
        return got.permute(1, 2, 0, 3, 4).flatten(2)


class DitRanks:
    """Rank 0 of a sequence-parallel DiT: call it as the DiT itself (x, timestep, audio, ref)."""

    def __init__(self, dit: FlashHeadDit, model_dir: Path, ranks: int, device: torch.device):
        self.dit, self.device = dit, device
        backend = "nccl" if device.type == "cuda" else "gloo"
        address = f"tcp://127.0.0.1:{_free_port()}"
        # processes of their own, not multiprocessing's: an engine worker is a daemon process,
        # and those may not start children that way
        self.helpers = [subprocess.Popen([sys.executable, "-m", __name__, str(r), str(ranks), address, backend,
                                          str(model_dir)]) for r in range(1, ranks)]
        dist.init_process_group(backend, init_method=address, rank=0, world_size=ranks)
        self.parallel = SequenceParallel(dit.blocks, dit.config.num_heads)

    def __call__(self, x: torch.Tensor, timestep: torch.Tensor, audio: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        inputs = [x, timestep, audio, ref]
        _broadcast(_header(inputs), self.device)
        for t in inputs:
            _broadcast(t.contiguous(), self.device)
        return self.dit(x, timestep, audio, ref, run_blocks=self.parallel)

    def close(self) -> None:
        """Ends the helper ranks and the group (the worker is going away)."""
        _broadcast(torch.full((HEADER,), STOP, dtype=torch.int64), self.device)
        for helper in self.helpers:
            try:
                helper.wait(10)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
        dist.destroy_process_group()


def _grouped(t: torch.Tensor, groups: int) -> torch.Tensor:
    """[b, g n, ...] -> [b, g, n, ...]."""
    return t.reshape(t.shape[0], groups, -1, *t.shape[2:])


def _header(inputs: list[torch.Tensor]) -> torch.Tensor:
    header = torch.zeros(HEADER, dtype=torch.int64)
    header[0] = len(inputs)
    for i, t in enumerate(inputs):
        at = 1 + i * (2 + DIMS)
        header[at], header[at + 1] = DTYPES.index(t.dtype), t.dim()
        header[at + 2 : at + 2 + t.dim()] = torch.tensor(t.shape)
    return header


def _inputs(header: torch.Tensor, device: torch.device) -> list[torch.Tensor]:
    """Receive the tensors a header announces."""
    out = []
    for i in range(int(header[0])):
        at = 1 + i * (2 + DIMS)
        shape = header[at + 2 : at + 2 + int(header[at + 1])].tolist()
        out.append(_broadcast(torch.empty(shape, dtype=DTYPES[int(header[at])]), device))
    return out


def _broadcast(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """From rank 0 to all, on the group's device (NCCL moves GPU tensors only)."""
    on = t.to(device)
    dist.broadcast(on, 0)
    return on


def helper(rank: int, ranks: int, address: str, backend: str, model_dir: str) -> None:
    """Rank `rank`: load the DiT, then take part in every forward rank 0 starts, until told to stop."""
    from .weights import dtype_on, load_dit

    _die_with_parent()
    torch.set_num_threads(1)
    device = torch.device(f"cuda:{rank}" if backend == "nccl" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=address, rank=rank, world_size=ranks)
    dit = load_dit(Path(model_dir)).to(device, dtype_on(device)).eval()
    parallel = SequenceParallel(dit.blocks, dit.config.num_heads)
    with torch.inference_mode():
        while True:
            header = _next_header(device)
            if header[0] == STOP:
                break
            dit(*_inputs(header, device), run_blocks=parallel)
    dist.destroy_process_group()


def _next_header(device: torch.device) -> torch.Tensor:
    """The next forward's header from rank 0. A worker that ends without saying STOP (killed, or
    crashed: its own log says why) closes the group's connections under this wait; the helper
    then goes too, with one line instead of a collective's traceback."""
    try:
        return _broadcast(torch.zeros(HEADER, dtype=torch.int64), device).cpu()
    except RuntimeError as err:  # gloo raises RuntimeError, NCCL its subclass DistBackendError
        print(f"DiT helper rank ends: its worker is gone ({str(err).splitlines()[0][:160]})", file=sys.stderr)
        os._exit(0)  # not through the process group's teardown, which would wait on the dead peer


def _die_with_parent(every_s: float = 1.0) -> None:
    """A helper rank ends with the worker that started it, however that ends: it is blocked in
    a collective then, so a thread watches for the worker to be gone (the child re-parented)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="watch-worker").start()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    helper(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:6])
