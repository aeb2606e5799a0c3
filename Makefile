# Paddock's two entry points. Both install what a fresh machine lacks (the
# guest toolchain included, through scripts/build-guests.sh).
.PHONY: demo test guests bench

# The embedded demo on SQLite: build, register the example components and
# jobs, run them, print the results, exit 0 when every job ended as expected.
demo: guests
	cargo run --quiet -p paddock -- demo

# Every test: unit, integration (real wasmtime, real guests, real processes)
# and the reference ledger's HTTP tests, in one run. Each integration test
# that touches the store runs on SQLite and on PostgreSQL, named for each
# (`...::sqlite`, `...::postgres`); scripts/test-postgres.sh finds or starts
# the server and makes a fresh database (no server fails the run), and
# scripts/test-counts.sh prints how many tests ran on each;
# scripts/test-tools.sh installs what tests run beside Paddock (faketime).
# Then the demo as a smoke test, with the binary `cargo test` just built
# (`cargo run -p paddock` would resolve features for one package only and
# rebuild half the tree).
test: guests
	bash scripts/test-tools.sh
	url=$$(bash scripts/test-postgres.sh) && \
	  PADDOCK_TEST_DATABASE_URL=$$url cargo test --workspace
	bash scripts/test-counts.sh
	"$${CARGO_TARGET_DIR:-target}/debug/paddock" demo

guests:
	bash scripts/build-guests.sh

# Benchmarks print figures; they assert nothing.
bench: guests
	cargo bench -p paddock --bench instantiate
