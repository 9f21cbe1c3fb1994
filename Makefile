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

.PHONY: demo api-key test install lint typecheck unit browser clean

RUNTIME_STAMP := $(VENV)/.installed-runtime

# `make demo` needs only the runtime dependencies; the checks add the dev tools on top.
$(RUNTIME_STAMP): pyproject.toml package.json package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	npm ci --no-audit --no-fund --loglevel=error
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

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

unit: $(STAMP)
	@mkdir -p var/staticfiles var/screenshots
	$(TEST_ENV) $(BIN)/pytest -m "not browser" $(PYTEST_ARGS)

browser: $(STAMP)
	@mkdir -p var/staticfiles var/screenshots
	$(TEST_ENV) $(BIN)/pytest -m browser $(PYTEST_ARGS)

test: lint typecheck unit browser

clean:
	rm -rf $(VENV) node_modules var
