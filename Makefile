# The README's two commands, and two for maintainers. All set up .venv/ first if needed.
# Without make (e.g. on Windows): python3 course.py lab|test|execute|bench|reset
PYTHON ?= python3
ARGS ?=

# one notebook, named any way the course manifest resolves it (lib/seqlab/manifest.py): 04, 4 or 04-lstm
NB ?=

.PHONY: lab test execute bench setup reset site notebook
lab:      ## set up, copy new notebooks into work/ (yours are never overwritten), open JupyterLab there (options: make lab ARGS="--no-browser --port 8899")
	$(PYTHON) course.py lab $(ARGS)
reset:    ## replace your copy of one notebook in work/ by the course's (yours goes to work/.old/): make reset NB=04 (or 4, 04-lstm)
	$(PYTHON) course.py reset $(NB)
test:     ## set up, then run every test (unit tests and notebooks), offline
	$(PYTHON) course.py test
execute:  ## re-run every notebook (or one: NB=04, 4 or 04-lstm) in place from a fresh kernel and print run times
	$(PYTHON) course.py execute $(NB) $(ARGS)
notebook: ## after editing one notebook: execute it, tag it across the profiles, run its tests: make notebook NB=11 (or 11-positional-encodings)
	$(PYTHON) course.py notebook $(NB)
bench:    ## speed of seqlab's models against torch.nn, as ratios measured in one run
	$(PYTHON) course.py bench
site:     ## the offline HTML edition: every executed notebook as static pages in build/site/ (open index.html)
	$(PYTHON) course.py site $(ARGS)
setup:
	$(PYTHON) course.py setup

# A class on a hub (README, For instructors). Both need root: the hub creates a system user per student and a
# memory cgroup per server. They build the hub's environment first (scripts/hub_env.py: .cache/hub/).
.PHONY: hub-smoke hub-load
N ?= 16
hub-smoke: ## the hub on loopback: two students' servers, kernels, widgets in Chromium, restart, course update, culling (CI runs it)
	$(PYTHON) course.py setup
	@if [ "$$(id -u)" != "0" ]; then echo "make hub-smoke needs root (system users and cgroups): run it as root, as CI does"; exit 1; fi
	$(PYTHON) scripts/hub_env.py
	SEQLAB_HUB_SMOKE=1 .venv/bin/python -m pytest tests/test_hub_smoke.py -p no:cacheprovider -p no:xdist -q -s
hub-load: ## by hand: N students (make hub-load N=16) through the hub's API and kernels; per-phase times, memory, one OOM
	$(PYTHON) course.py setup
	@if [ "$$(id -u)" != "0" ]; then echo "make hub-load needs root (system users and cgroups): run it as root"; exit 1; fi
	$(PYTHON) scripts/hub_env.py
	.venv/bin/python scripts/hub_load.py --students $(N) $(ARGS)
