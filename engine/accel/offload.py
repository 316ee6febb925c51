"""Weight placement for large models: per-block offload with prefetch, and FSDP sharding.

BlockOffloader keeps a model's transformer blocks in host memory (pinned where an
accelerator exists) and runs them one by one: block n+1's host-to-device copy is issued
on a side stream while block n computes, and block n's device copy is freed right after
its forward, so at most two blocks are resident. On a CPU the copies are no-ops and the
same code path runs. `shard` wraps blocks with FSDP2 (`fully_shard`) and forward prefetch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.func import functional_call

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


class BlockOffloader:
    """Runs `blocks` in order on `device` from host-resident weights; see the module docstring."""

    def __init__(self, blocks: nn.ModuleList, device: torch.device | str,
                 trace: Callable[[str, int], None] | None = None):
        self.blocks, self.device = blocks, torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.trace = trace or (lambda op, i: None)
        self.resident: dict[int, dict[str, torch.Tensor]] = {}
        self.peak_resident = 0
        self._ready: dict[int, torch.cuda.Event] = {}
        # torch.cuda.Stream.__new__ and Event.__new__ carry no annotations
        self._stream = torch.cuda.Stream(self.device) if self.cuda else None  # type: ignore[no-untyped-call]
        if self.cuda:
            for block in blocks:  # pinned host memory makes the copies asynchronous
                for p in block.parameters():
                    p.data = p.data.pin_memory()

    def _fetch(self, i: int) -> None:
        self.trace("copy", i)
        tensors = {**dict(self.blocks[i].named_parameters()), **dict(self.blocks[i].named_buffers())}
        if self.cuda:
            with torch.cuda.stream(self._stream):
                self.resident[i] = {k: v.to(self.device, non_blocking=True) for k, v in tensors.items()}
                event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                event.record(self._stream)
                self._ready[i] = event
        else:
            self.resident[i] = {k: v.to(self.device) for k, v in tensors.items()}
        self.peak_resident = max(self.peak_resident, len(self.resident))

    def _wait(self, i: int) -> None:
        event = self._ready.pop(i, None)
        if event is not None:
            torch.cuda.current_stream(self.device).wait_event(event)

    def __call__(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if not len(self.blocks):
            return x
        self._fetch(0)
        for i, block in enumerate(self.blocks):
            self._wait(i)
            if i + 1 < len(self.blocks):
                self._fetch(i + 1)  # overlaps this block's compute
            self.trace("compute", i)
            x = functional_call(block, self.resident[i], (x, *args), kwargs)
            if self.cuda:  # keep the memory alive until the compute stream is done with it
                for t in self.resident[i].values():
                    t.record_stream(torch.cuda.current_stream(self.device))
            del self.resident[i]
            self.trace("free", i)
        return x


def shard(blocks: nn.ModuleList, root: nn.Module, mesh: DeviceMesh | None = None) -> nn.Module:
    """FSDP2: each block is its own shard unit; block n+1's all-gather is prefetched while
    block n computes. Call inside an initialised process group (NCCL on GPUs, gloo on CPUs)."""
    from torch.distributed.fsdp import fully_shard

    # fully_shard returns the module itself, now typed as an FSDPModule
    sharded = [fully_shard(block, mesh=mesh) for block in blocks]
    fully_shard(root, mesh=mesh)
    for block, following in zip(sharded, sharded[1:]):
        block.set_modules_to_forward_prefetch([following])
    return root
