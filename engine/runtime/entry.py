"""Process entry points (engine workers, the render CLI), importable without loading model code."""

from typing import Any

from engine.threads import single_threaded


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
