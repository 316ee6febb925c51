# The two commands of the README. Each installs what it needs first.
.PHONY: run test setup bench

setup:
	@scripts/setup.sh

run: setup
	.venv/bin/avatar-server $(ARGS)

test: setup
	.venv/bin/python -m pytest $(ARGS)

bench: setup
	.venv/bin/python bench/session.py
