//! Per-attempt limits taken from the resource group, and the memory limiter
//! that enforces the group's cap and records the peak.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use wasmtime::ResourceLimiter;

/// Linear memory the live guests of one sandbox hold, bytes: what their
/// stores grew to, summed; a store gives its share back when dropped. One
/// sandbox per serving process, so it is the process's guest memory — the
/// level of the runner's memory high-water mark.
#[derive(Debug, Default)]
pub struct MemoryGauge(AtomicU64);

impl MemoryGauge {
    pub fn in_use(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What one attempt may use.
#[derive(Debug, Clone)]
pub struct GuestLimits {
    /// Fuel (roughly, wasm instructions) for the whole attempt.
    pub fuel: u64,
    /// Linear memory, summed over the instance's memories.
    pub memory_bytes: u64,
    /// Wall-clock time for the whole attempt.
    pub deadline: Duration,
    /// Table elements per table.
    pub table_elements: usize,
    /// What the group grants (WASI capabilities, connectors).
    pub grants: std::sync::Arc<crate::model::grants::Grants>,
    /// Size caps on what the guest hands the host.
    pub caps: crate::model::caps::OutputCaps,
}

impl GuestLimits {
    /// The limits, grants and caps of an attempt in `group` whose plan asks
    /// for `needs` (it gets what the group grants of them).
    pub fn of_group(group: &crate::model::ResourceGroup, needs: &[String]) -> Self {
        Self {
            fuel: group.fuel_per_attempt as u64,
            memory_bytes: group.memory_bytes as u64,
            deadline: Duration::from_millis(group.deadline_ms as u64),
            grants: std::sync::Arc::new(group.granted().narrowed_to(needs)),
            caps: group.caps,
            ..Self::default()
        }
    }
}

impl Default for GuestLimits {
    fn default() -> Self {
        Self {
            fuel: 10_000_000_000,
            memory_bytes: 64 << 20,
            deadline: Duration::from_secs(60),
            table_elements: 100_000,
            grants: Default::default(),
            caps: Default::default(),
        }
    }
}

/// Enforces the memory cap for one store and remembers the high-water mark
/// and whether a growth was denied (so a resulting trap is classified as the
/// memory limit, not as a guest bug).
#[derive(Debug)]
pub struct MemoryLimiter {
    gauge: std::sync::Arc<MemoryGauge>,
    cap: u64,
    table_elements: usize,
    current: u64,
    peak: u64,
    denied: bool,
    table_denied: bool,
}

impl MemoryLimiter {
    pub fn new(limits: &GuestLimits, gauge: std::sync::Arc<MemoryGauge>) -> Self {
        Self {
            gauge,
            cap: limits.memory_bytes,
            table_elements: limits.table_elements,
            current: 0,
            peak: 0,
            denied: false,
            table_denied: false,
        }
    }

    pub fn peak_bytes(&self) -> u64 {
        self.peak
    }

    /// Whether a table growth was denied (the table-element cap).
    pub fn table_denied(&self) -> bool {
        self.table_denied
    }

    pub fn denied(&self) -> bool {
        self.denied
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.gauge.0.fetch_sub(self.current, Ordering::Relaxed);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = self.current + (desired - current) as u64;
        if after > self.cap {
            self.denied = true;
            return Ok(false);
        }
        self.gauge
            .0
            .fetch_add(after - self.current, Ordering::Relaxed);
        self.current = after;
        self.peak = self.peak.max(after);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.table_elements;
        self.table_denied |= !allowed;
        Ok(allowed)
    }

    /// Growth refused past the pool's own table size (before or after
    /// [`Self::table_growing`] is asked) is the same limit.
    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.table_denied = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_past_the_cap_is_denied_and_remembered() {
        let gauge = std::sync::Arc::new(MemoryGauge::default());
        let mut l = MemoryLimiter::new(
            &GuestLimits {
                memory_bytes: 1 << 20,
                ..GuestLimits::default()
            },
            gauge.clone(),
        );
        assert!(l.memory_growing(0, 512 << 10, None).unwrap());
        assert!(l.memory_growing(512 << 10, 1 << 20, None).unwrap());
        assert!(!l.denied());
        assert!(!l.memory_growing(1 << 20, (1 << 20) + 65536, None).unwrap());
        assert!(l.denied());
        assert_eq!(l.peak_bytes(), 1 << 20);
        // The sandbox's gauge holds what the store holds, until it is dropped.
        assert_eq!(gauge.in_use(), 1 << 20);
        drop(l);
        assert_eq!(gauge.in_use(), 0);
    }
}
