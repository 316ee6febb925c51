"""The flow-matching sigmas are exact on a known flow; the N/I schedule keeps order and anchors."""

import numpy as np
import pytest

from engine.core.chunks import interior, plan
from engine.families.motion.sigmas import flow_sigmas

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 25, 100])
@pytest.mark.parametrize("shift", [1.0, 3.0])
def test_euler_over_the_sigmas_recovers_the_exact_target_for_any_step_count(steps, shift):
    """On the straight path to x0 the velocity is (x - x0) / sigma, and Euler is exact."""
    rng = np.random.default_rng(steps)
    x0 = rng.standard_normal((4, 16))
    sigmas = flow_sigmas(steps, shift)
    assert sigmas[0] == 1 and sigmas[-1] == 0 and len(sigmas) == steps + 1
    x = rng.standard_normal((4, 16))
    for i in range(steps):
        x = x + (sigmas[i + 1] - sigmas[i]) * (x - x0) / sigmas[i]
    assert np.allclose(x, x0, atol=1e-5)


def test_shift_spends_more_steps_at_high_noise():
    plain, shifted = flow_sigmas(10, 1.0), flow_sigmas(10, 3.0)
    assert (shifted[1:-1] > plain[1:-1]).all()


def test_order_is_n0_n1_i0_n2_i1():
    order = [(c.kind, c.index) for c in plan(length=8, anchor=2, chunks=5)]
    assert order == [("N", 0), ("N", 1), ("I", 0), ("N", 2), ("I", 1), ("N", 3), ("I", 2), ("N", 4), ("I", 3)]


def test_i_chunks_run_after_both_neighbours_and_cover_the_timeline_once():
    done, owner = set(), {}
    for chunk in plan(length=8, anchor=2, chunks=6):
        if chunk.kind == "I":
            assert ("N", chunk.index) in done and ("N", chunk.index + 1) in done
            first, last = chunk.anchors
            assert first == 8 * (chunk.index + 1) - 1 and last == 8 * (chunk.index + 1) + 2
        done.add((chunk.kind, chunk.index))
        for frame in range(*chunk.keep):
            assert frame not in owner, f"frame {frame} produced twice"
            owner[frame] = chunk
    assert sorted(owner) == list(range(6 * 8))


def test_i_chunk_discards_its_anchor_predictions():
    chunk = next(c for c in plan(length=8, anchor=2, chunks=3) if c.kind == "I")
    predictions = [f"pred{n}" for n in range(chunk.anchors[0], chunk.anchors[1] + 1)]
    kept = interior(predictions, chunk)
    assert kept == predictions[1:-1] and len(kept) == chunk.keep[1] - chunk.keep[0]
    with pytest.raises(ValueError):
        interior(predictions[:-1], chunk)


def test_open_ended_plan_for_live_sessions():
    stream = plan(length=4)
    assert [next(stream).kind for _ in range(7)] == ["N", "N", "I", "N", "I", "N", "I"]
