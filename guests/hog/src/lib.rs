//! `hog`: a job that allocates memory until the host's limit stops it.
//!
//! Demonstrates that the host's memory cap (`StoreLimits` / pooling limits)
//! fails the attempt cleanly: the guest keeps 1 MiB chunks alive forever, each
//! filled so every page is really touched; when `memory.grow` is refused the
//! allocator reports failure, `handle_alloc_error` aborts, and an abort is a
//! wasm trap. Nothing the guest does can exceed the cap.

wit_bindgen::generate!({
    path: "../../wit",
    world: "job",
});

use paddock::job::log;

struct Hog;

const CHUNK: usize = 1 << 20;

impl Guest for Hog {
    fn run() -> Result<Vec<u8>, JobError> {
        log::log(
            log::Level::Info,
            "hog: allocating 1 MiB chunks until the host says no",
        );
        let mut kept: Vec<Vec<u8>> = Vec::new();
        loop {
            // `vec![x; n]` with a non-zero byte writes every byte, unlike a
            // zeroed allocation that fresh wasm pages would satisfy for free.
            let chunk = vec![0xA5u8; CHUNK];
            kept.push(core::hint::black_box(chunk));
            core::hint::black_box(&kept);
        }
    }
}

export!(Hog);
