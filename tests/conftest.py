"""Shared fixtures: a real avatar-server process on a free loopback port."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from testkit import shaped_link
from testkit.server import SHARED_DATA, ServerProcess


@pytest.fixture(scope="session")
def server():
    with ServerProcess() as proc:
        yield proc


@pytest.fixture(scope="module")
def link():
    """The shaped link of testkit/shaped_link.py, wide to start with; removed afterwards."""
    if why := shaped_link.can_shape():
        pytest.skip(why)
    try:
        shaped_link.sh("ip", "netns", "add", shaped_link.NS)
    except subprocess.CalledProcessError as exc:
        if shaped_link.real_root():
            raise  # root, with iproute2: making a namespace must work, and a failure is a failure
        pytest.skip(f"cannot make a network namespace here: {exc.stderr.decode().strip()}")
    try:
        shaped_link.connect()
        yield
    finally:
        shaped_link.remove()


@pytest.fixture(scope="session")
def jfk_pcm48() -> np.ndarray:
    """../shared/data/jfk.flac as 48 kHz mono int16 (real human speech)."""
    from testkit.audio import decoded

    return decoded(SHARED_DATA / "jfk.flac")


@pytest.fixture(scope="session")
def jfk_pcm16(jfk_pcm48) -> np.ndarray:
    """The same speech at 16 kHz, as agents push it."""
    from scipy.signal import resample_poly

    return np.clip(resample_poly(jfk_pcm48.astype(np.float32), 1, 3), -32768, 32767).astype(np.int16)
