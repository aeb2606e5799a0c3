//! People's text as printed: reasons, names, actors, job names and error
//! messages come from whoever typed them (a team's token, a guest's error)
//! and are printed to an operator's terminal and to logs. A control
//! character in them could forge a line (`\n`), move the cursor or
//! recolour the screen (`ESC [`), or reorder what is read (the Unicode
//! bidirectional controls). [`escape`] writes each one visibly instead;
//! every CLI printer and every log field that carries such text goes
//! through it, so a printed line is the host's, whole.

use std::borrow::Cow;
use std::fmt;

/// Characters that would change how the rest of the output reads: the C0
/// and C1 controls and DEL, the line and paragraph separators, and the
/// bidirectional embeddings, overrides and isolates.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// `text` with every unsafe character written as an escape (`\n`, `\r`,
/// `\t`, else `\u{1b}`); borrowed when there is none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A value printed through [`escape`], keeping the format's width and
/// alignment (`{:<16}`): `println!("{:<16}", Esc(&job.name))`.
pub struct Esc<T>(pub T);

impl<T: fmt::Display> fmt::Display for Esc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = if f.alternate() {
            format!("{:#}", self.0)
        } else {
            self.0.to_string()
        };
        match escape(&text) {
            // Nothing to escape: the value formats itself, with every flag
            // (a number's precision, an error's `{:#}` chain).
            Cow::Borrowed(_) => fmt::Display::fmt(&self.0, f),
            Cow::Owned(escaped) => f.pad(&escaped),
        }
    }
}

/// `{:?}`: a value's own `Debug`, escaped too (a string's `Debug` escapes
/// C0 controls, not the bidirectional ones).
impl<T: fmt::Debug> fmt::Debug for Esc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = if f.alternate() {
            format!("{:#?}", self.0)
        } else {
            format!("{:?}", self.0)
        };
        match escape(&text) {
            Cow::Borrowed(_) => fmt::Debug::fmt(&self.0, f),
            Cow::Owned(escaped) => f.pad(&escaped),
        }
    }
}

/// JSON text as printed: every unsafe character written as a JSON escape
/// (`\u009b`) but the line breaks between values. JSON puts control
/// characters in strings only, and serializers escape C0 there already,
/// so this keeps the text the same JSON.
pub fn json_safe(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if c != '\n' && is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// An optional text, escaped, or `default`.
pub fn esc_or<'a>(text: Option<&'a str>, default: &'a str) -> Cow<'a, str> {
    escape(text.unwrap_or(default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_visibly_and_plain_text_is_untouched() {
        assert_eq!(
            escape("ok\n2026-01-01 resumed by admin\u{1b}[2J\u{7}"),
            "ok\\n2026-01-01 resumed by admin\\u{1b}[2J\\u{7}"
        );
        assert_eq!(
            escape("a\u{202E}b\u{2028}c\u{9b}d"),
            "a\\u{202e}b\\u{2028}c\\u{9b}d"
        );
        assert!(matches!(escape("plain text, ünïcode ✓"), Cow::Borrowed(_)));
        assert_eq!(format!("[{:<6}]", Esc("a\tb")), "[a\\tb  ]");
        assert_eq!(esc_or(None, "-"), "-");
        assert_eq!(format!("{:.2}", Esc(3.14159)), "3.14");
        let json = "{\n  \"a\": \"x\u{9b}y\"\n}";
        let safe = json_safe(json);
        assert_eq!(safe, "{\n  \"a\": \"x\\u009by\"\n}");
        let value: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(value["a"], "x\u{9b}y");
    }
}
