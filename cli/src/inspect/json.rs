//! Just enough JSON for `--json`: strings and their escapes.

use std::fmt::Write as _;

/// `s` as a JSON string literal.
pub(crate) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON string, or `null`.
pub(super) fn opt_string(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_owned(), string)
}

/// A JSON number, or `null`.
pub(super) fn opt_number(n: Option<impl std::fmt::Display>) -> String {
    n.map_or_else(|| "null".to_owned(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes() {
        assert_eq!(super::string("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"");
        assert_eq!(super::opt_string(None), "null");
        assert_eq!(super::opt_number(Some(3)), "3");
        assert_eq!(super::opt_number(None::<u64>), "null");
    }
}
