# ferrokv entry points. `make run` and `make test` are the two a newcomer needs.
CARGO ?= cargo
RDBTOOL := target/release/rdbtool
DEMO := fixtures/rdb/redis-7.0/all-types.rdb

SERVER_DATA := target/ferrokv-data

.PHONY: run server dump-demo build test lint unit compat conformance conformance-spawned redis-py bench fixtures catalog fuzz faults fuzz-diff deps clean

# The binaries, and their man pages and shell completions (generated from the same clap
# definitions) in target/doc-gen/man1 and target/doc-gen/completions.
build:
	$(CARGO) build --release --bins
	for t in rdbtool aoftool aof-rewrite replay; do target/release/$$t --generate all target/doc-gen || exit 1; done

# Start ferrokv-server in the foreground with its embedded default config (Redis 7.0's
# defaults, port 6379); data in target/ferrokv-data. Ctrl-C saves and exits.
run: build
	mkdir -p $(SERVER_DATA)
	target/release/ferrokv-server --dir $(SERVER_DATA)

server: run

# Dump the bundled fixture (written by a real Redis 7.0) as jsonl.
dump-demo: build
	$(RDBTOOL) dump $(DEMO)

deps:
	./scripts/install-deps.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	# The fuzz crate lives outside the workspace: keep it compiling with the library.
	$(CARGO) check --manifest-path fuzz/Cargo.toml
	# No import cycle longer than 3 files; format/ imports nothing outside itself (docs/architecture.md).
	python3 scripts/check-layers.py .

unit:
	$(CARGO) test --profile ci --workspace

# Everything that needs no ../shared. Integration tests drive a real redis-server.
test: deps lint unit

# Needs ../shared (corpus and external fixtures) beside the checkout.
compat:
	$(CARGO) build --profile ci -p ferrokv-server
	$(CARGO) test --profile ci -p ferrokv-tools --tests -- --ignored
	$(CARGO) test --profile ci -p ferrokv-server --test field_ttls --test replication --test exactness --test redis62 --test redis72 --test redis74 --test command_docs -- --ignored

# Redis's own TCL suite against ferrokv-server (REDIS_SRC: the extracted 7.0.15 suite; see
# docs/conformance.md). Not part of make test: fetching the suite is a developer step.
conformance:
	./scripts/conformance.sh

# redis-py's own test suite against a real redis-server and ferrokv-server (REDIS_PY_SRC:
# redis-py 5.0.8's source; see docs/conformance.md).
redis-py:
	./scripts/redis-py.sh

# Units of Redis's suite in spawned mode, the suite starting ferrokv-server as
# src/redis-server (docs/conformance.md); REDIS_SRC as above, of the tag tested.
conformance-spawned:
	./scripts/conformance-spawned.sh

# Regenerate engine/src/command/catalog.json from each version's command JSON (source trees
# extracted from their tags, outside the project) and a real Redis 6.2's COMMAND reply.
# SRC: the directory holding redis-7.0.15, redis-7.2.6, redis-7.4.1, valkey-7.2.7, valkey-8.0.1.
SRC ?= ../src
catalog:
	python3 scripts/gen-commands.py --json redis-7.0=$(SRC)/redis-7.0.15 --json redis-7.2=$(SRC)/redis-7.2.6 \
		--json redis-7.4=$(SRC)/redis-7.4.1 --json valkey-7.2=$(SRC)/valkey-7.2.7 --json valkey-8.0=$(SRC)/valkey-8.0.1 \
		--server redis-6.2=../shared/bin/redis-server-6.2.16

# Regenerate the committed fixtures from a real redis-server.
fixtures:
	python3 fixtures/generate.py

bench: deps build
	./bench/run.sh

fuzz:
	./fuzz/run.sh

# Every fault-injection case: every N of every write-path call failing, a real-Redis load of
# every directory, 100 kill -9 trials (make test runs a reduced set). See docs/reliability.md.
faults: deps
	FERROKV_FAULTS=full $(CARGO) test --profile ci -p ferrokv -p ferrokv-server --test faults -- --nocapture

# Differential fuzzing against a real Redis 7.0 (make test runs a short fixed-seed run).
# FUZZ_DIFF_SECS (default 600), FUZZ_DIFF_COMMANDS, FUZZ_DIFF_SEED. See docs/reliability.md.
FUZZ_DIFF_SECS ?= 600
fuzz-diff: deps
	FUZZ_DIFF_SECS=$(FUZZ_DIFF_SECS) $(CARGO) test --profile ci -p ferrokv-server --test differential -- --ignored --nocapture

clean:
	$(CARGO) clean
