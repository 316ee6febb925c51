"""Spawn target for engine workers, importable without loading any model code."""

import os

# One worker per core: BLAS and OpenMP thread pools inside it would only fight each
# other and the server for the same cores. Set before numpy/cv2 load in the child.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def run_worker(*args) -> None:
    for var in THREAD_VARS:
        os.environ[var] = "1"
    from .worker import main

    main(*args)
