# The two commands of the README. Each installs what it needs first.
.PHONY: run test setup bench motion-data real-data shape-data train-motion train-closure train-shape eval-motion judge-motion judge-wild

setup:
	@scripts/setup.sh

run: setup
	.venv/bin/avatar-server $(ARGS)

test: setup
	@scripts/setup.sh test
	scripts/test.sh $(ARGS)

bench: setup
	.venv/bin/python bench/session.py

# The motion model (training/motion/, see the README): real faces and synthetic voices,
# training (about 13 min on 2 cores), evaluation on held-out real speakers against the
# interim module and a loudness mouth. The weights are committed; CI only runs a few
# steps of each script.
motion-data: setup
	.venv/bin/python -m training.motion.recipe --out .cache/motion-data --scale 0.5 --seed 0

real-data: setup
	.venv/bin/python -m training.motion.real_faces --out .cache/real-faces
	.venv/bin/python -m training.motion.real_data --faces .cache/real-faces --out .cache/real-data

train-motion: setup
	.venv/bin/python -m training.motion.train --data .cache/real-data .cache/motion-data --steps 20000 --lookahead 2 --seed 0

train-closure: setup
	.venv/bin/python -m training.motion.closure --data .cache/real-data .cache/motion-data --steps 8000 --seed 0

shape-data: setup  # real-data's clips with their rounding labels, plus two re-timed copies of each
	.venv/bin/python -m training.motion.real_data --faces .cache/real-faces --out .cache/real-data-speed --speeds 2

train-shape: setup
	.venv/bin/python -m training.motion.lip_shape --data .cache/real-data-speed --seed 0

eval-motion: setup
	.venv/bin/python -m training.motion.real_eval --data .cache/real-data --sheets .cache/sheets

judge-motion: setup
	.venv/bin/python -m training.motion.judge --out .cache/judge --sheet .cache/judge/sheet.png

SPLIT ?= validation
judge-wild: setup  # the wild set gathered first: python -m training.motion.wild_set --repos DIR
	.venv/bin/python -m training.motion.judge --split $(SPLIT) --out .cache/judge-wild --sheet .cache/judge-wild/$(SPLIT).png
