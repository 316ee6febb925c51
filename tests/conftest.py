"""Shared fixtures: a real avatar-server process on a free loopback port."""

from __future__ import annotations

import numpy as np
import pytest

from testkit.audio import write_wav  # noqa: F401 - tests import these from here too
from testkit.server import ARTIFACTS, ROOT, SHARED_DATA, ServerProcess, free_port  # noqa: F401


@pytest.fixture(scope="session")
def server():
    with ServerProcess() as proc:
        yield proc


@pytest.fixture(scope="session")
def jfk_pcm48() -> np.ndarray:
    """../shared/data/jfk.flac as 48 kHz mono int16 (real human speech)."""
    import av

    with av.open(str(SHARED_DATA / "jfk.flac")) as container:
        resampler = av.AudioResampler("s16", "mono", 48000)
        chunks = [f.to_ndarray().ravel() for frame in container.decode(audio=0) for f in resampler.resample(frame)]
    return np.concatenate(chunks).astype(np.int16)
