# Tandem: `make demo` runs the product standalone; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The test suite runs against real PostgreSQL and Redis (see README "Running the tests").
TEST_ENV := \
	DATABASE_URL=$${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/tandem} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/0} \
	SECRET_KEY=test-secret-key-not-for-production-0123456789abcdef \
	FIELD_ENCRYPTION_KEYS=$${TEST_FIELD_ENCRYPTION_KEYS:-qx7dD0H3ZxKdbMgFq3aXNd7R5lOqdRkk2m8Wq1fW0cM=} \
	TANDEM_HTTPS=false DEBUG=false LOG_LEVEL=warning PASSWORD_HASH_ITERATIONS=1000

.PHONY: demo api-key test machine install lint typecheck unit real browser clean lock real-engine assistant-clients assistants

RUNTIME_STAMP := $(VENV)/.installed-runtime

# `make demo` needs only the runtime dependencies; the checks add the dev tools on top. Both install
# the exact versions (and hashes) of requirements/*.lock, so every machine gets what CI tested.
$(RUNTIME_STAMP): pyproject.toml requirements/runtime.lock package.json package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r requirements/runtime.lock
	$(BIN)/pip install --quiet --no-deps -e .
	npm ci --no-audit --no-fund --loglevel=error
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) requirements/dev.lock
	$(BIN)/pip install --quiet --require-hashes -r requirements/dev.lock
	touch $(STAMP)

# After changing dependencies in pyproject.toml: re-lock both sets (uv, in a venv of its own).
UV := $(VENV)-tools/bin/uv
LOCK_ARGS := --universal --python-version 3.11 --generate-hashes --quiet
lock:
	test -x $(UV) || ($(PYTHON) -m venv $(VENV)-tools && $(VENV)-tools/bin/pip install --quiet uv)
	$(UV) pip compile pyproject.toml --extra dev $(LOCK_ARGS) -o requirements/dev.lock
	$(UV) pip compile pyproject.toml -c requirements/dev.lock $(LOCK_ARGS) -o requirements/runtime.lock

install: $(STAMP)

demo: $(RUNTIME_STAMP)
	$(BIN)/python -m standalone

# A key in the demo's database for scripts and CI, e.g. make api-key ARGS="--purpose automation --scopes deploy"
api-key: $(RUNTIME_STAMP)
	@$(BIN)/python -m standalone.apikey $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(TEST_ENV) $(BIN)/mypy .

# The real engine the conformance suite runs beside the simulated one (realengine/): vLLM for the CPU in
# a virtualenv of its own under ~/.cache/tandem (TANDEM_REAL_ENGINE_HOME), installed once per machine
# (3.5 GB, about 3 minutes); a failed install stops here and prints the command that repeats it.
# `make real` runs its tests.
real-engine: $(RUNTIME_STAMP)
	$(BIN)/python -m realengine.install

# The suite spends most of its time waiting on real processes (sandbox clusters, servers, workers), so
# it runs in TEST_WORKERS parallel workers, one test module each at a time (tests/parallel.py gives every
# worker its own Redis database; pytest-django, its own test database), the longest modules first
# (tests/module_weights.txt) so that both workers end together. TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 2
unit: $(STAMP)
	@mkdir -p var/staticfiles var/screenshots
	$(TEST_ENV) $(BIN)/python -m pytest -p tests.parallel -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not browser and not real_engine and not assistant" $(PYTEST_ARGS)

# Tests that run real vLLM processes, in one worker after the others: a starting engine takes both
# cores for a minute, which the suite's real-time tests must not share.
real: $(STAMP) real-engine
	@mkdir -p var/staticfiles var/screenshots
	$(TEST_ENV) $(BIN)/python -m pytest -m real_engine $(PYTEST_ARGS)

# The coding-assistant clients the conformance suite runs (Claude Code, Codex, opencode, Qwen Code, Cline
# from npm; aider in a venv of its own, never a Tandem dependency) at pinned versions, installed once per
# machine under ~/.cache/tandem/assistants (TANDEM_ASSISTANTS_HOME); a failed install prints the command
# that repeats it. `make assistants` runs each against the gateway, one at a time after the unit tests.
assistant-clients: $(RUNTIME_STAMP)
	$(BIN)/python -m assistants.install

assistants: $(STAMP) assistant-clients
	@mkdir -p var/staticfiles var/screenshots
	$(TEST_ENV) $(BIN)/python -m pytest -m assistant $(PYTEST_ARGS)

# The browser tests wait on sandbox clusters and servers far more than Chromium uses the CPU: two workers.
browser: $(STAMP)
	@mkdir -p var/staticfiles var/screenshots
	$(TEST_ENV) $(BIN)/python -m pytest -p tests.parallel -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m browser $(PYTEST_ARGS)

# The machine's part first: PostgreSQL and Redis running, Chromium, kubectl, Prometheus (started or
# installed; without root it stops with the command to run).
machine:
	@./tests/setup/machine.sh

test: machine lint typecheck unit real assistants browser

clean:
	rm -rf $(VENV) $(VENV)-tools node_modules var
