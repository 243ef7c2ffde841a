# The two set-up commands of README.md: `make run` (the main job: the embedded broker and the
# reference Spark pipeline) and `make test`. `make serve` starts just the broker.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install run serve test bench

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(PY)
	$(PY) -m pip install -q -e '.[test,spark]'
	@if command -v npm >/dev/null 2>&1; then npm install --prefix tests/js --no-audit --no-fund --loglevel=error >/dev/null; fi

# `make run ARGS="--master spark://host:7077"` runs the pipeline on a Spark cluster (docs/spark.md).
run: install
	$(PY) -m logbroker.pipeline $(ARGS)

serve: install
	$(VENV)/bin/logbroker serve

test: install
	$(VENV)/bin/pytest -q

bench: install
	$(PY) bench/bench_storage.py
	$(PY) bench/bench_broker.py
	$(PY) bench/bench_spark.py
