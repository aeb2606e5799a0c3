//! A run's result bytes in JSON (the API's triggers): the JSON value
//! itself when the bytes are JSON, else a string when they are UTF-8, else
//! base64 — with `result_encoding` saying which (`json`, `utf8`,
//! `base64`), so every byte comes back as it was: a JSON result is
//! embedded as written (whitespace and key order kept; bytes that are JSON
//! only after trimming go as a string), and a string of JSON text is told
//! apart from the JSON value by the encoding.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// How a result's bytes are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The value is the bytes, as JSON.
    Json,
    /// The value is a string of the bytes' UTF-8 text.
    Utf8,
    /// The value is a string of the bytes in standard base64 (padded).
    Base64,
}

/// `bytes` as a JSON value and its encoding.
pub fn encode(bytes: &[u8]) -> (Box<RawValue>, Encoding) {
    let as_string =
        |text: &str| serde_json::value::to_raw_value(text).expect("a string serializes");
    match std::str::from_utf8(bytes) {
        Ok(text) => match serde_json::from_str::<Box<RawValue>>(text) {
            Ok(raw) if raw.get() == text => (raw, Encoding::Json),
            _ => (as_string(text), Encoding::Utf8),
        },
        Err(_) => (as_string(&STANDARD.encode(bytes)), Encoding::Base64),
    }
}

/// The bytes `value` carries in `encoding`.
pub fn decode(value: &RawValue, encoding: Encoding) -> Result<Vec<u8>, String> {
    let string = || {
        serde_json::from_str::<String>(value.get())
            .map_err(|e| format!("a {encoding:?} result must be a string: {e}"))
    };
    match encoding {
        Encoding::Json => Ok(value.get().as_bytes().to_vec()),
        Encoding::Utf8 => string().map(String::into_bytes),
        Encoding::Base64 => STANDARD
            .decode(string()?)
            .map_err(|e| format!("result is not base64: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_comes_back_byte_for_byte_in_the_right_encoding() {
        let cases: [(&[u8], Encoding, &str); 7] = [
            (
                b"{\"total\": 3,\n \"a\": [1, 2]}",
                Encoding::Json,
                "{\"total\": 3,\n \"a\": [1, 2]}",
            ),
            (b"42", Encoding::Json, "42"),
            (b"\"quoted\"", Encoding::Json, "\"quoted\""),
            (b"hello, world", Encoding::Utf8, "\"hello, world\""),
            (b" 7 ", Encoding::Utf8, "\" 7 \""),
            (b"", Encoding::Utf8, "\"\""),
            (&[0xff, 0x00, 0x10], Encoding::Base64, "\"/wAQ\""),
        ];
        for (bytes, encoding, json) in cases {
            let (value, got) = encode(bytes);
            assert_eq!((got, value.get()), (encoding, json), "{bytes:?}");
            assert_eq!(decode(&value, got).unwrap(), bytes);
        }
    }
}
