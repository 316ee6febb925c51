"""`avatar-server` / `python -m server`: serve the demo page, the JS client and the API."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aiohttp import web

from .app import create_app
from .config import ServerConfig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="avatar-server", description=__doc__)
    parser.add_argument("--host", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8080)")
    parser.add_argument("--avatar", type=Path, help="portrait image for the default avatar")
    parser.add_argument("--config", type=Path, help="TOML file (reserved; AVATAR_* variables work today)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    avatar = _prepare_avatar(args.avatar) if args.avatar else None
    config = ServerConfig.from_env(host=args.host, port=args.port, avatar=avatar)
    web.run_app(create_app(config), host=config.host, port=config.port, print=None)


def _prepare_avatar(path: Path) -> Path:
    """Crop and analyse a user's photo once; the prepared copy is what workers load."""
    import cv2
    import numpy as np

    from engine.avatar import NoFaceError, cache_path, image_digest, prepare_portrait

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise SystemExit(f"avatar-server: cannot read image {path}")
    try:
        portrait = prepare_portrait(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    except NoFaceError as exc:
        raise SystemExit(f"avatar-server: {path}: {exc}") from None
    out = Path.home() / ".cache" / "avatar-server" / f"{path.stem}-{image_digest(portrait.image)}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), cv2.cvtColor(portrait.image, cv2.COLOR_RGB2BGR))
    np.save(cache_path(out), portrait.landmarks)
    return out


if __name__ == "__main__":
    main()
