"""The DiT run sequence parallel: two gloo ranks give the single process's flow."""

import pytest
import torch

from engine.families.latent.config import TINY_AUDIO, TINY_DIT, TINY_STREAM, TINY_VAE
from testkit.ranks import two_ranks

pytestmark = pytest.mark.unit


def inputs(seed: int = 1, side: int = 8) -> list[torch.Tensor]:
    """A chunk's latents (9 frames of side x side; 16 tokens a frame), timestep, audio, reference."""
    g = torch.Generator().manual_seed(seed)
    c = TINY_DIT
    x = torch.randn(1, c.in_dim // 2, 9, side, side, generator=g)
    audio = torch.randn(1, 1 + 4 * 8, c.audio_window, c.audio_layers, c.audio_dim, generator=g)
    return [x, torch.tensor([750.0]), audio, torch.randn(x.shape, generator=g)]


def _rank(rank: int, port: int, results) -> None:
    import torch.distributed as dist

    from engine.families.latent.dit import FlashHeadDit
    from engine.families.latent.parallel import SequenceParallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        dit = FlashHeadDit(TINY_DIT).eval()
        with torch.inference_mode():
            expected = dit(*inputs())
            got = dit(*inputs(), run_blocks=SequenceParallel(dit.blocks, TINY_DIT.num_heads))
        results[rank] = float((got - expected).abs().max())
    finally:
        dist.destroy_process_group()


def test_two_ranks_each_holding_half_of_every_frames_tokens_give_the_whole_flow():
    results = two_ranks(_rank)
    assert results[0] < 1e-5 and results[1] < 1e-5, results


def test_a_worker_starts_its_helper_rank_from_the_model_folder_and_ends_it(tmp_path):
    from engine.families.latent.models import load_models, write_random_model

    folder = write_random_model(tmp_path, TINY_DIT, TINY_VAE, TINY_AUDIO, TINY_STREAM)
    models = load_models(folder, "cpu", ranks=2)
    assert models.ranks is not None
    helper = models.ranks.helpers[0]
    try:
        with torch.inference_mode():
            for seed in (1, 2):  # two steps: the helper serves one forward after another
                got = models.flow(*inputs(seed))
                want = models.dit(*inputs(seed))
                assert float((got - want).abs().max()) < 1e-5
    finally:
        models.ranks.close()
    assert helper.poll() == 0, "the helper rank ended when told to"

