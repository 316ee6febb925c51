"""Spawn target for engine workers, importable without loading any model code."""


def run_worker(*args) -> None:
    from .worker import main

    main(*args)
