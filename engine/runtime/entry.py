"""Process entry points (engine workers, the render CLI), importable without loading model code."""

import os
from typing import Any

# One worker per core: BLAS and OpenMP thread pools inside it would only fight each
# other and the server for the same cores. Set before numpy/cv2 load in the child.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded() -> None:
    """One BLAS/OpenMP thread; must run before numpy or cv2 load (children inherit it)."""
    for var in THREAD_VARS:
        os.environ[var] = "1"


def run_worker(*args: Any) -> None:  # engine.runtime.worker.main's arguments, passed through
    single_threaded()
    from engine.runtime.worker import main

    main(*args)


def run_render() -> None:
    """`avatar-render`: the motion model's small matrices run slower with BLAS threads, and
    those threads would spin on the cores the decode processes need."""
    single_threaded()
    from engine.batch.render import main

    main()
