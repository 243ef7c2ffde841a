# The two set-up commands of README.md: `make run` (the main job: the embedded broker and the
# reference Spark pipeline) and `make test`. `make serve` starts just the broker.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install run serve test bench fuzz docs docs-serve reference-docs

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# An editable install leaves src/ without bytecode (pip compiles every other package's): the
# broker's first start would compile the ~110 modules it imports, taking ~260 ms instead of ~130
# and keeping ~2 MiB more memory. compileall writes it here, whatever PYTHONDONTWRITEBYTECODE says.
install: $(PY)
	$(PY) -m pip install -q -e '.[test,spark,docs]'
	$(PY) -m compileall -q src
	@if command -v npm >/dev/null 2>&1; then npm install --prefix tests/js --no-audit --no-fund --loglevel=error >/dev/null; fi

# `make run ARGS="--master spark://host:7077"` runs the pipeline on a Spark cluster (docs/spark.md).
run: install
	$(PY) -m logbroker.pipeline $(ARGS)

serve: install
	$(VENV)/bin/logbroker serve

# Three pytest-xdist workers (most tests wait on brokers, ZooKeeper and clients more than they
# compute, so a third worker shortens the run on 2 cores), a test module per unit of work (tests/conftest.py has the order);
# `pytest tests/x.py` alone runs in one process as usual.
test: install
	$(VENV)/bin/pytest -q -n 3 --dist loadfile --no-loadscope-reorder

# The long fuzz run (tests/fuzz): COUNT mutated requests from SEED against a real broker. `make test`
# runs a bounded 3,000 cases; a failure names its case, which FUZZ_ONLY=<index> replays.
SEED ?= 1
COUNT ?= 100000
fuzz: install
	FUZZ_SEED=$(SEED) FUZZ_COUNT=$(COUNT) $(VENV)/bin/pytest -q -s tests/fuzz -k never_hurt

bench: install
	$(PY) bench/bench_storage.py
	$(PY) bench/bench_broker.py
	$(PY) bench/bench_spark.py

# The manual (docs/, mkdocs.yml) as a site in site/; strict: a broken link or anchor fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# Regenerates docs/reference/ from the code (tests/tools/test_reference_docs.py fails when stale).
reference-docs: install
	$(PY) -m logbroker.tools.reference_docs
