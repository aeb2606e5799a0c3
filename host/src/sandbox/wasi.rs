//! WASI 0.2, linked deny-by-default (through `wasmtime-wasi`), so that
//! components built by standard toolchains (componentize-py,
//! componentize-js, `wasm32-wasip2`) instantiate, and get nothing
//! dangerous unless their resource group grants it
//! ([`crate::model::grants`]).
//!
//! Always, whatever the grants: no sockets or name lookup (TCP, UDP and
//! lookups are refused with `access-denied`), no `wasi:http` outgoing
//! requests (those imports are linked as traps that end the attempt as
//! `not_granted`), no preopened directories, stdin empty.
//!
//! A guest's WASI context is built on its first WASI call, so a component
//! that imports no WASI (the Rust guests built for `wasm32-unknown-unknown`)
//! pays nothing for it.

use crate::model::grants::Grants;
use sha2::{Digest, Sha256};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::pipe::SinkOutputStream;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// What an attempt's WASI context is built from.
#[derive(Debug, Clone)]
pub struct WasiSetup {
    pub grants: Arc<Grants>,
    /// The trigger's identity: seeds the deterministic random stream.
    pub trigger_id: String,
    /// The trigger's scheduled time: the frozen wall clock.
    pub scheduled_at: Duration,
    /// Bytes of stdout + stderr kept (with `stdio` granted).
    pub output_cap: usize,
}

/// An attempt's WASI state: built lazily, see the module's doc.
pub struct WasiState {
    setup: WasiSetup,
    built: Option<(WasiCtx, ResourceTable)>,
    output: Arc<Mutex<CapturedOutput>>,
    /// The attempt's scratch directory (with `scratch:SIZE`), removed when
    /// the attempt's store is dropped.
    scratch: Option<PathBuf>,
}

impl WasiState {
    pub fn new(setup: WasiSetup) -> Self {
        Self {
            output: Arc::new(Mutex::new(CapturedOutput::new(setup.output_cap))),
            setup,
            built: None,
            scratch: None,
        }
    }

    pub fn view(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        if self.built.is_none() {
            let mut builder = builder(&self.setup, &self.output);
            if self.setup.grants.scratch.is_some() {
                self.scratch = scratch_dir(&self.setup.trigger_id, &mut builder);
            }
            self.built = Some((builder.build(), ResourceTable::default()));
        }
        let (ctx, table) = self.built.as_mut().expect("built above");
        wasmtime_wasi::WasiCtxView { ctx, table }
    }

    /// The refusal, if the scratch directory holds more than its grant.
    pub fn scratch_over_cap(&self) -> Option<String> {
        let (dir, cap) = (self.scratch.as_ref()?, self.setup.grants.scratch?);
        let used = dir_bytes(dir);
        (used > cap).then(|| {
            format!(
                "the scratch directory holds {used} bytes, over the group's grant of {cap} bytes"
            )
        })
    }

    /// What the guest wrote to stdout and stderr (with `stdio` granted),
    /// as log text: one `stdout: ` line per line written.
    pub fn output_text(&self) -> String {
        self.output.lock().expect("captured output").text()
    }
}

impl Drop for WasiState {
    fn drop(&mut self) {
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh directory under the system's temp dir (`paddock-scratch-<trigger
/// id>-<n>`), preopened at `/scratch` read-write (wasmtime-wasi opens it
/// through cap-std: nothing outside it is reachable).
fn scratch_dir(trigger_id: &str, builder: &mut WasiCtxBuilder) -> Option<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "paddock-scratch-{trigger_id}-{}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).ok()?;
    match builder.preopened_dir(&dir, "/scratch", wasmtime_wasi::FsPerms::ReadWrite) {
        Ok(_) => Some(dir),
        Err(_) => {
            let _ = std::fs::remove_dir_all(&dir);
            None
        }
    }
}

/// Bytes under `dir`, each entry counting at least one 4 KiB block (so a
/// flood of empty files counts too).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => 4096 + dir_bytes(&e.path()),
            Ok(m) => m.len().max(4096),
            Err(_) => 4096,
        })
        .sum()
}

fn builder(setup: &WasiSetup, output: &Arc<Mutex<CapturedOutput>>) -> WasiCtxBuilder {
    let mut b = WasiCtxBuilder::new();
    b.allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }));
    let grants = &setup.grants;
    if grants.stdio {
        b.stdout(Captured {
            stream: "stdout",
            output: output.clone(),
        });
        b.stderr(Captured {
            stream: "stderr",
            output: output.clone(),
        });
    } else {
        b.stdout(SinkOutputStream).stderr(SinkOutputStream);
    }
    for (name, value) in &grants.env {
        b.env(name, value);
    }
    if !grants.random {
        let stream = deterministic_bytes(&setup.trigger_id);
        let seed = u128::from_le_bytes(stream[..16].try_into().expect("16 bytes"));
        b.secure_random(wasmtime_wasi::Deterministic::new(stream.clone()))
            .insecure_random(wasmtime_wasi::Deterministic::new(stream))
            .insecure_random_seed(seed);
    }
    if !grants.clocks {
        b.wall_clock(FrozenWallClock(setup.scheduled_at))
            .monotonic_clock(AttemptClock(Instant::now()));
    }
    b
}

/// 4 KiB derived from the trigger id by a SHA-256 chain: the random stream
/// an ungranted guest sees, the same on every attempt at the trigger.
fn deterministic_bytes(trigger_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4096);
    let mut block: [u8; 32] = Sha256::digest(format!("paddock-random:{trigger_id}")).into();
    while out.len() < 4096 {
        out.extend_from_slice(&block);
        block = Sha256::digest(block).into();
    }
    out
}

/// The wall clock without `clocks`: the trigger's scheduled time.
struct FrozenWallClock(Duration);

impl HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// The monotonic clock without `clocks`: nanoseconds since the attempt
/// began (it measures, it does not tell the time).
struct AttemptClock(Instant);

impl HostMonotonicClock for AttemptClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }
    fn now(&self) -> u64 {
        // Millisecond resolution: enough to time work, too coarse to time
        // the host.
        let ms = self.0.elapsed().as_millis() as u64;
        ms * 1_000_000
    }
}

/// stdout + stderr of one attempt, bounded: what does not fit is counted
/// and dropped, and the guest's writes still succeed.
struct CapturedOutput {
    cap: usize,
    kept: Vec<(&'static str, Vec<u8>)>,
    size: usize,
    dropped: usize,
}

impl CapturedOutput {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            kept: Vec::new(),
            size: 0,
            dropped: 0,
        }
    }

    fn write(&mut self, stream: &'static str, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.size);
        let take = bytes.len().min(room);
        self.dropped += bytes.len() - take;
        if take == 0 {
            return;
        }
        self.size += take;
        match self.kept.last_mut() {
            Some((s, buf)) if *s == stream => buf.extend_from_slice(&bytes[..take]),
            _ => self.kept.push((stream, bytes[..take].to_vec())),
        }
    }

    fn text(&self) -> String {
        let mut text = String::new();
        for (stream, bytes) in &self.kept {
            for line in String::from_utf8_lossy(bytes).lines() {
                text.push_str(stream);
                text.push_str(": ");
                text.push_str(line);
                text.push('\n');
            }
        }
        if self.dropped > 0 {
            text.push_str(&format!(
                "[{} more bytes of output dropped]\n",
                self.dropped
            ));
        }
        text
    }
}

/// One of the guest's output streams, into [`CapturedOutput`].
#[derive(Clone)]
struct Captured {
    stream: &'static str,
    output: Arc<Mutex<CapturedOutput>>,
}

impl IsTerminal for Captured {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Captured {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for Captured {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.output
            .lock()
            .expect("captured output")
            .write(self.stream, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_output_is_bounded_and_split_into_lines() {
        let mut out = CapturedOutput::new(16);
        out.write("stdout", b"hello\nwor");
        out.write("stdout", b"ld\n");
        out.write("stderr", b"oops, far too long");
        assert_eq!(
            out.text(),
            "stdout: hello\nstdout: world\nstderr: oops\n[14 more bytes of output dropped]\n"
        );
    }

    #[test]
    fn the_ungranted_random_stream_is_a_function_of_the_trigger() {
        assert_eq!(deterministic_bytes("17"), deterministic_bytes("17"));
        assert_ne!(deterministic_bytes("17"), deterministic_bytes("18"));
        assert_eq!(deterministic_bytes("17").len(), 4096);
    }
}
