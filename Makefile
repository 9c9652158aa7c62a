# ferrokv entry points. `make run` and `make test` are the two a newcomer needs.
CARGO ?= cargo
RDBTOOL := target/release/rdbtool
DEMO := fixtures/rdb/redis-7.0/all-types.rdb

SERVER_DATA := target/ferrokv-data

.PHONY: run server build test lint unit compat conformance bench fixtures fuzz deps clean

build:
	$(CARGO) build --release --bins

# Dump the bundled fixture (written by a real Redis 7.0) as jsonl.
run: build
	$(RDBTOOL) dump $(DEMO)

# Start ferrokv-server with the bundled default config; data under target/.
server: build
	mkdir -p $(SERVER_DATA)
	target/release/ferrokv-server server/ferrokv.conf --dir $(SERVER_DATA)

deps:
	./scripts/install-deps.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	# The fuzz crate lives outside the workspace: keep it compiling with the library.
	$(CARGO) check --manifest-path fuzz/Cargo.toml

unit:
	$(CARGO) test --profile ci --workspace

# Everything that needs no ../shared. Integration tests drive a real redis-server.
test: deps lint unit

# Needs ../shared (corpus and external fixtures) beside the checkout.
compat:
	$(CARGO) test --profile ci -p ferrokv-tools --tests -- --ignored

# Redis's own TCL suite against ferrokv-server (REDIS_SRC: the extracted 7.0.15 suite; see
# docs/conformance.md). Not part of make test: fetching the suite is a developer step.
conformance:
	./scripts/conformance.sh

# Regenerate the committed fixtures from a real redis-server.
fixtures:
	python3 fixtures/generate.py

bench: deps build
	./bench/run.sh

fuzz:
	./fuzz/run.sh

clean:
	$(CARGO) clean
