# kindling: the two commands a new machine needs are `make demo` and `make test`.
# Both install what they use: a Python 3.13 virtualenv in .venv with the project and its
# dev extras, and (for the local cloud) LocalStack and Valkey under infra/.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export SAM_CLI_TELEMETRY := 0
# Lambda's runtime is python3.13; pyenv's build is preferred, then one on PATH.
PYTHON313 ?= $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13) \
                         $(shell command -v python3.13 2>/dev/null))
# Lambda's oldest runtime in support: the unit and conformance drawers run on it too (make test).
PYTHON311 ?= $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.11*/bin/python3.11) \
                         $(shell command -v python3.11 2>/dev/null))
VENV311 := .venv311
PYTEST_ARGS ?=
# Makes a virtualenv and installs into it, with uv (from PyPI) when it can be had, else pip.
VENV_INSTALL := infra/venv/install

PHONY_311 := install311 test311
.PHONY: $(PHONY_311) install demo demo-moto test check unit lint build validate queues layer-size dist bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON313)" || { echo "Python 3.13 not found: install it (pyenv install 3.13) or set PYTHON313=/path/to/python3.13"; exit 1; }
	@# The distribution was named kindling before 0.1.0 went to PyPI as kindling-jobs: drop that install.
	@test ! -x $(PY) || $(PY) -m pip uninstall --quiet --disable-pip-version-check -y kindling 2>/dev/null || true
	$(VENV_INSTALL) $(VENV) $(PYTHON313) -e '.[dev]'
	@touch $@

## The same project and dev extras on Python 3.11, in .venv311 (make test311 runs drawers there).
install311: $(VENV311)/.installed

$(VENV311)/.installed: pyproject.toml
	@test -n "$(PYTHON311)" || { echo "Python 3.11 not found: install it (pyenv install 3.11) or set PYTHON311=/path/to/python3.11"; exit 1; }
	$(VENV_INSTALL) $(VENV311) $(PYTHON311) -e '.[dev]'
	@touch $@

## The unit and conformance drawers on Python 3.11 (the service-marked unit tests too: they need
## only moto's in-process server).
DRAWERS_311 := tests/unit tests/conformance
test311: install311
	$(VENV311)/bin/python -m pytest $(DRAWERS_311) $(PYTEST_ARGS)

## The main job on a local cloud: deploy, enqueue a few hundred jobs, drain, report.
demo: install
	$(PY) infra/localstack/demo.py

## The same demo on moto's embedded AWS (no LocalStack, no Lambda), in a virtualenv of its own
## (.venv-demo: kindling, boto3 and moto's server, none of the dev tools).
DEMO_VENV := .venv-demo
demo-moto: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/kindling demo --cloud moto

$(DEMO_VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON313)" || { echo "Python 3.13 not found: install it (pyenv install 3.13) or set PYTHON313=/path/to/python3.13"; exit 1; }
	$(VENV_INSTALL) $(DEMO_VENV) $(PYTHON313) -e '.[demo]'
	@touch $@

## The whole suite, every drawer (docs/architecture.md), in three processes at once: the tests
## that deploy to LocalStack one after another (they share its stacks), every other drawer
## on two workers, and the unit and conformance drawers on Python 3.11 (make test311, its
## .venv311 made first). LocalStack installs and starts in the background meanwhile.
STACK_DRAWERS := tests/stack
test: install
	@mkdir -p .state; booted=; \
	 if ! infra/localstack/ctl status >/dev/null 2>&1; then \
	   (infra/localstack/ctl install && infra/localstack/ctl start) > .state/localstack-boot.log 2>&1 & \
	   echo $$! > .state/localstack-boot.pid; booted=1; \
	 fi; \
	 set +e; \
	 ($(PY) -m pytest $(STACK_DRAWERS) $(PYTEST_ARGS) > .state/test-stack.log 2>&1; echo $$? > .state/test-stack.rc) & \
	 stack=$$!; \
	 ($(MAKE) -s test311 PYTEST_ARGS='-p no:cacheprovider $(PYTEST_ARGS)' > .state/test-311.log 2>&1; \
	  echo $$? > .state/test-311.rc) & \
	 py311=$$!; \
	 $(PY) -m pytest -n 2 --ignore-glob='$(STACK_DRAWERS)/*' $(PYTEST_ARGS); rc=$$?; \
	 wait $$stack; echo; echo "==== $(STACK_DRAWERS) (run alongside) ===="; cat .state/test-stack.log; \
	 src=$$(cat .state/test-stack.rc); \
	 wait $$py311; echo; echo "==== $(DRAWERS_311) on Python 3.11 (run alongside) ===="; cat .state/test-311.log; \
	 rc311=$$(cat .state/test-311.rc); if [ $$rc311 -eq 5 ]; then rc311=0; fi; \
	 if [ -n "$$booted" ]; then \
	   kill $$(cat .state/localstack-boot.pid) 2>/dev/null; wait; rm -f .state/localstack-boot.pid; \
	   infra/localstack/ctl stop >/dev/null 2>&1; \
	 fi; \
	 if [ $$rc -eq 5 ]; then rc=0; fi; if [ $$src -eq 5 ]; then src=0; fi; \
	 [ $$rc -eq 0 ] && [ $$src -eq 0 ] && [ $$rc311 -eq 0 ]

## The inner loop: the drawers that need no service (no sockets, no LocalStack).
check: install
	$(PY) -m pytest tests/unit tests/tooling -m "not service and not slow" $(PYTEST_ARGS)

unit: install
	$(PY) -m pytest tests/unit -m "not service" $(PYTEST_ARGS)

## ruff, and checkov on template.yaml (infra/checkov/run: its own virtualenv, made on first use).
lint: install
	$(VENV)/bin/ruff check layers functions tests infra
	infra/checkov/run

validate: install
	sam validate --lint

## Render the named queues into template.yaml: make queues QUEUES="reports bulk:5" (name[:max concurrency]).
queues:
	python3 infra/queues/render.py $(QUEUES)

build: install
	sam build

## Build the layer with `sam build`, and for arm64 with its Makefile, and print each one's
## size zipped as `sam deploy` uploads it (tests/tooling/test_layer_contents.py holds the budget);
## then the Valkey stream support's layer, which a worker with a Valkey URL carries on top.
LAYERFILES := layers/kindling/kindling/tools/layerfiles.py
layer-size: install
	sam build KindlingLayer
	@rm -rf .state/layer-arm64 && $(MAKE) -s -C layers/kindling build-KindlingLayer ARCH=arm64 \
	  ARTIFACTS_DIR=$(CURDIR)/.state/layer-arm64 PYTHON=$(CURDIR)/$(PY) >/dev/null
	@rm -rf .state/layer-valkey && $(MAKE) -s -C layers/kindling build-KindlingValkeyLayer \
	  ARTIFACTS_DIR=$(CURDIR)/.state/layer-valkey PYTHON=$(CURDIR)/$(PY) >/dev/null
	@echo "layer zip, x86_64: $$($(PY) -I $(LAYERFILES) --size .aws-sam/build/KindlingLayer) bytes"
	@echo "layer zip, arm64:  $$($(PY) -I $(LAYERFILES) --size .state/layer-arm64) bytes"
	@echo "Valkey layer zip (with a Valkey URL, either architecture): $$($(PY) -I $(LAYERFILES) --size .state/layer-valkey) bytes"

## The release's files: the sdist and the wheel (built from the sdist, as pip builds from
## source) in $(DIST_DIR). `pip install dist/kindling_jobs-*.whl` installs kindling anywhere.
DIST_DIR ?= dist
dist: install
	rm -f $(DIST_DIR)/kindling_jobs-*
	$(PY) -m build --no-isolation --outdir $(DIST_DIR) .

## Benchmarks: kindling vs Celery vs a boto3 + Powertools handler, interleaved (QUICK=1: < 10 min).
BENCH_VENV := .venv-bench
# arq and dramatiq, the Valkey peers, in their own virtualenv: their redis-py pins stay
# apart from Celery's.
BENCH_PEERS_VENV := infra/bench/.venv
BENCH_PEERS := 'arq==0.28.0' 'dramatiq[redis]==2.2.1' 'psutil>=6'
bench: install
	$(VENV_INSTALL) $(BENCH_VENV) $(PYTHON313) -e '.[bench]'
	$(VENV_INSTALL) $(BENCH_PEERS_VENV) $(PYTHON313) $(BENCH_PEERS)
	$(BENCH_VENV)/bin/python infra/bench/run.py $(if $(QUICK),--quick) $(if $(ONLY),--only $(ONLY)) --out bench-results

clean:
	rm -rf .aws-sam .pytest_cache .hypothesis .ruff_cache build dist
