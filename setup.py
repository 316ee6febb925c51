"""The wheel's packages. Everything else is in pyproject.toml; this file exists for one thing
pyproject.toml cannot say: the demo pages (static/) and the JS client (web/) live at the top
of the repository, beside server/ and engine/, and travel in the wheel as server/static and
server/web (engine/package_files.py finds them in either place)."""

from setuptools import find_namespace_packages, setup

PAGES = {"server.static": "static", "server.web": "web"}

setup(
    packages=find_namespace_packages(include=["server*", "engine*", "media*", "speech*", "avatar_client*",
                                              "training*", "testkit*"]) + list(PAGES),
    package_dir=PAGES,
    # Everything the server reads at run time travels in the wheel.
    package_data={"engine": ["weights/*", "assets/*"], "server.static": ["*"], "server.web": ["*.js", "*.d.ts"]},
)
