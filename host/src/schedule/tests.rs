//! Cross-file tests of the schedule module. `reference` is an independent
//! brute-force evaluator (walks every local second, compares fields with
//! plain `==`/ranges, maps to UTC with chrono's own `from_local_datetime`
//! and the DST policy written out again) — it never calls the code under
//! test. `dst` checks real 2026/2027 transitions against it and against
//! hand-written instants; `props` checks random expressions, zones, windows
//! and chunked re-scans.

mod dst;
mod props;
mod reference;
