"""Thread pools per process: one BLAS/OpenMP thread, set before numpy or cv2 load."""

import os

# One worker per core: BLAS and OpenMP thread pools inside it would only fight each
# other and the server for the same cores. Set before numpy/cv2 load in the child.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded_env(env: dict[str, str]) -> dict[str, str]:
    """A child process's environment with one thread each, unless the caller chose otherwise."""
    return {**{var: "1" for var in THREAD_VARS}, **env}


def single_threaded() -> None:
    """One BLAS/OpenMP thread; must run before numpy or cv2 load (children inherit it)."""
    for var in THREAD_VARS:
        os.environ[var] = "1"
