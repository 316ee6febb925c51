"""Files the package ships (weights, avatars, pages, the JS client), found through
importlib.resources so that a wheel, an editable install and a source checkout all work:
nothing here may assume the checkout's layout (issue 31)."""

from __future__ import annotations

import atexit
import contextlib
from importlib.resources import as_file, files
from pathlib import Path

# Where a package is imported from a zip, as_file extracts to a temporary folder that must
# live as long as the process: the paths handed out are read for its whole life.
_EXTRACTED = contextlib.ExitStack()
atexit.register(_EXTRACTED.close)


def package_path(package: str, *parts: str) -> Path:
    """A real file-system path to a file or folder shipped inside `package`."""
    resource = files(package).joinpath(*parts)
    if isinstance(resource, Path):
        return resource
    return _EXTRACTED.enter_context(as_file(resource))


def top_level_folder(name: str) -> Path:
    """static/ (the demo pages) or web/ (the JS client): at the top of a checkout (editable
    installs too), and inside the server package in a wheel (setup.py puts them there)."""
    shipped = package_path("server", name)
    return shipped if shipped.is_dir() else Path(__file__).resolve().parents[1] / name
