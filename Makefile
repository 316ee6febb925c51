# The two commands of the README. Each installs what it needs first.
.PHONY: run test setup bench motion-data train-motion eval-motion

setup:
	@scripts/setup.sh

run: setup
	.venv/bin/avatar-server $(ARGS)

test: setup
	.venv/bin/python -m pytest $(ARGS)

bench: setup
	.venv/bin/python bench/session.py

# The motion model (training/motion/, see the README): data, training (about 40 min on
# 2 cores), evaluation against the interim module. The weights are committed; CI only
# runs a few steps of each script.
motion-data: setup
	.venv/bin/python -m training.motion.recipe --out .cache/motion-data --scale 0.8 --seed 0

train-motion: setup
	.venv/bin/python -m training.motion.train --data .cache/motion-data --steps 20741 --seed 0

eval-motion: setup
	.venv/bin/python -m training.motion.evaluate --data .cache/motion-data
