# The two set-up commands of the README: `make demo` and `make test`.
# Each installs what it needs on a fresh machine (Python 3.11 + pip + apt, package registries only).

PIP ?= python -m pip
# torch==2.13.0 is the CPU build; a plain `torch` requirement pulls a multi-GB CUDA build.
TORCH = torch==2.13.0

.PHONY: demo test install install-test browser

install:
	$(PIP) install $(TORCH) -e .

install-test: browser
	$(PIP) install $(TORCH) -e ".[test]"

# The dashboard's end-to-end test drives Debian's Chromium (Playwright's own browser download
# does not work offline).
browser:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

demo: install
	ragkit dashboard --demo

test: install-test
	python -m pytest
