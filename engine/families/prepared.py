"""A user's avatar file, photo or clip, prepared once into what the engine loads."""

from __future__ import annotations

import sys
from pathlib import Path

from engine.families.video.clip import SUFFIXES


def prepare_file(path: Path, folder: Path, size: int = 512) -> Path:
    """The prepared avatar for a photo (.png, analysed) or a clip (.clip.npz, cached by its
    content, a progress line on stderr while it works). Raises ValueError (NoFaceError,
    ClipError) with a reason a person can act on, or OSError."""
    if path.suffix.lower() not in SUFFIXES:
        from engine.families.portrait.avatar import prepare_upload

        return folder / f"{prepare_upload(path.read_bytes(), str(folder))}.png"
    from engine.families.video.prepare import prepare_clip
    from engine.families.video.reference import SUFFIX

    def progress(share: float, stage: str) -> None:
        sys.stderr.write(f"\r\033[Kpreparing {path.name}: {share:4.0%} {stage}")
        sys.stderr.flush()

    if not path.is_file():
        raise OSError(f"no such file: {path}")
    avatar_id = prepare_clip(path, folder, size, progress)
    sys.stderr.write("\n")
    return folder / f"{avatar_id}{SUFFIX}"
