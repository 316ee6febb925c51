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
    from engine.avatar import NoFaceError, prepare_upload

    try:
        avatar_id = prepare_upload(path.read_bytes(), str(ServerConfig.from_env().avatars_dir))
    except (OSError, NoFaceError) as exc:
        raise SystemExit(f"avatar-server: {path}: {exc}") from None
    return ServerConfig.from_env().avatars_dir / f"{avatar_id}.png"


if __name__ == "__main__":
    main()
