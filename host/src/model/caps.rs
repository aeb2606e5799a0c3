//! Size caps per resource group: how large each thing a guest (or a team's
//! manifest) hands the host may be. Exceeding one is the guest's fault: the
//! attempt ends as `output_too_large` (permanent, never retried) or the
//! manifest/trigger is refused, and nothing past the cap is stored.

use serde::{Deserialize, Serialize};

/// The caps, bytes. Stored as JSON on the group; a field not stored takes
/// its default, so older groups get sane caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutputCaps {
    /// A plan's `[params]` (at `job apply`) and a trigger's params (at
    /// creation), as JSON.
    pub params: u64,
    /// `run`'s output.
    pub result: u64,
    /// The message of `run`'s error.
    pub error: u64,
    /// One checkpoint.
    pub checkpoint: u64,
    /// One effect's payload.
    pub effect_payload: u64,
    /// One effect's response body, as handed to the guest.
    pub effect_response: u64,
    /// The attempt's log, stdout/stderr included.
    pub log: u64,
}

impl Default for OutputCaps {
    fn default() -> Self {
        Self {
            params: 64 << 10,
            result: 1 << 20,
            error: 16 << 10,
            checkpoint: 1 << 20,
            effect_payload: 256 << 10,
            effect_response: 1 << 20,
            log: 64 << 10,
        }
    }
}

/// The largest any cap may be set to: 64 MiB (wasmtime copies a value the
/// guest hands the host; the memory cap bounds it too).
pub const MAX_CAP: u64 = 64 << 20;

impl OutputCaps {
    /// Each cap with the flag (`--max-<name>`) and file field that set it.
    pub fn named(&self) -> [(&'static str, u64); 7] {
        [
            ("params", self.params),
            ("result", self.result),
            ("error", self.error),
            ("checkpoint", self.checkpoint),
            ("effect-payload", self.effect_payload),
            ("effect-response", self.effect_response),
            ("log", self.log),
        ]
    }

    /// The first cap out of range, named.
    pub fn problem(&self) -> Option<String> {
        self.named().into_iter().find_map(|(name, v)| {
            (v == 0 || v > MAX_CAP).then(|| {
                format!("max-{name} must be between 1 byte and {MAX_CAP} bytes (64MiB), not {v}")
            })
        })
    }

    /// The most one host call may copy out of the guest: the largest cap
    /// plus room for the call's other fields (keys, names). Wasmtime
    /// refuses a call over it before allocating on the host, so a guest
    /// cannot make the host hold more than this per call, whatever its
    /// memory cap.
    pub fn per_call_bytes(&self) -> u64 {
        self.named().iter().map(|(_, v)| *v).max().unwrap_or(0) + (64 << 10)
    }

    /// `what` of `size` bytes against `cap`: the refusal, naming both.
    pub fn check(what: &str, size: usize, cap: u64) -> Result<(), String> {
        if size as u64 > cap {
            Err(format!(
                "{what} of {size} bytes exceeds the resource group's cap of {cap} bytes"
            ))
        } else {
            Ok(())
        }
    }
}

/// The start of an oversized text, for a message: at most `max` bytes, cut
/// on a character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_their_defaults() {
        let caps: OutputCaps = serde_json::from_str(r#"{"result": 10}"#).unwrap();
        assert_eq!(caps.result, 10);
        assert_eq!(caps.log, OutputCaps::default().log);
        assert_eq!(
            serde_json::from_str::<OutputCaps>("{}").unwrap(),
            OutputCaps::default()
        );
    }

    #[test]
    fn out_of_range_caps_and_oversized_values_are_named() {
        let caps = OutputCaps {
            checkpoint: 0,
            ..Default::default()
        };
        assert!(caps.problem().unwrap().starts_with("max-checkpoint"));
        assert!(OutputCaps::default().problem().is_none());
        let err = OutputCaps::check("result", 11, 10).unwrap_err();
        assert_eq!(
            err,
            "result of 11 bytes exceeds the resource group's cap of 10 bytes"
        );
        assert!(OutputCaps::check("result", 10, 10).is_ok());
        assert_eq!(prefix("héllo", 2), "h");
    }
}
