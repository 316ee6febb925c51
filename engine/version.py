"""The package's version: pyproject.toml is its one source, read back from the installed metadata."""

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "avatar-server"


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"
