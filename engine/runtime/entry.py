"""Process entry points (engine workers, the render CLI), importable without loading model code."""

import os
from typing import Any

from engine.config import nvidia_gpus
from engine.threads import single_threaded


def visible_gpu(index: int, gpus: int, environ: dict[str, str], per_worker: int = 1) -> str | None:
    """The GPUs engine worker `index` should see: one worker per GPU (the default number of
    workers), or `per_worker` each for a DiT run across them, unless the operator (or Ray)
    chose the devices already."""
    if gpus < 2 or "CUDA_VISIBLE_DEVICES" in environ:
        return None
    first = index * per_worker % gpus
    return ",".join(str((first + i) % gpus) for i in range(per_worker))


def run_worker(*args: Any) -> None:  # engine.runtime.worker.main's arguments, passed through
    single_threaded()
    gpu = visible_gpu(args[0], nvidia_gpus(), dict(os.environ), args[3].dit_gpus)
    if gpu is not None:  # before torch initialises CUDA
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    from engine.runtime.worker import main

    main(*args)


def run_render() -> None:
    """`avatar-render`: the motion model's small matrices run slower with BLAS threads, and
    those threads would spin on the cores the decode processes need."""
    single_threaded()
    from engine.batch.render import main

    main()
