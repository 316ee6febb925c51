"""Two torch.distributed ranks on this machine (gloo), as tests and benchmarks start them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp

from testkit.server import free_port


def two_ranks(target: Callable[..., None], *args: Any) -> dict[int, Any]:
    """Run `target(rank, port, results, *args)` in two spawned processes that meet on a free
    loopback port; what each put in `results[rank]`."""
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(target, args=(free_port(), results, *args), nprocs=2, join=True)
        return dict(results)
