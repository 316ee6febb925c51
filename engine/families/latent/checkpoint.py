"""Loading the latent family's weights from a folder the user downloaded; nothing is fetched.

A folder holds safetensors (possibly sharded) or `.pth` / `.bin` files, read with
`weights_only=True`. Every parameter of our module must be present with its exact shape; an
error names the folder's files, the missing or mismatched tensor and the expected shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

WEIGHT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")


class CheckpointError(ValueError):
    pass


def weight_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise CheckpointError(f"model folder {folder} does not exist")
    files = sorted(p for p in folder.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not files:
        raise CheckpointError(f"no weights in {folder}: expected {' or '.join('*' + s for s in WEIGHT_SUFFIXES)}")
    return files


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file: say which
        raise CheckpointError(f"{path}: not a readable checkpoint ({exc})") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors, found {type(state).__name__}")
    return state


def load_into(module: nn.Module, files: Iterable[Path], prefix: str = "", renames: dict[str, str] | None = None,
              ignored: tuple[str, ...] = ()) -> None:
    """Copy the files' tensors into `module` (names after stripping `prefix` and `renames`).

    Names starting with one of `ignored` are parts of the published model that this one does
    not run (a CTC head, the training-only mask embedding); any other name must match."""
    files = list(files)
    found: dict[str, tuple[torch.Tensor, Path]] = {}
    for path in files:
        for name, tensor in read_tensors(path).items():
            name = name.removeprefix(prefix)
            for old, new in (renames or {}).items():
                name = name.replace(old, new)
            found[name] = (tensor, path)
    expected = module.state_dict()
    where = ", ".join(str(p) for p in files)
    missing = [f"{k} {tuple(v.shape)}" for k, v in expected.items() if k not in found]
    if missing:
        raise CheckpointError(f"{where} lacks {len(missing)} tensors, e.g. {'; '.join(missing[:3])}")
    unknown = [k for k in found if k not in expected and not k.startswith(ignored)]
    if unknown:
        raise CheckpointError(f"{where} holds tensors this model does not have, e.g. {'; '.join(unknown[:3])}")
    for name, target in expected.items():
        tensor, path = found[name]
        if tuple(tensor.shape) != tuple(target.shape):
            raise CheckpointError(f"{path}: {name} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}")
    module.load_state_dict({k: found[k][0] for k in expected}, strict=True)
