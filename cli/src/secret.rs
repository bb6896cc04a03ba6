//! Keep passwords out of everything the command prints.
//!
//! Node URLs carry passwords (`redis://user:pass@host`). The messages redlease writes itself
//! name nodes without them, but some text is not ours: clap quotes the arguments it rejects
//! (`unexpected argument 'redis://u:pass@h'` when `--nodes` was forgotten), and library errors
//! quote what they were given. Every message on stderr goes through [`scrub`] on its way out.

/// Hide the password in every URL-like word of `text`.
///
/// A word (split at whitespace and quotes) that holds an `@` has its user information hidden
/// the way the core hides it in a bad URL: from after `://` (or the word's start) to the
/// last `@`, what follows the first `:` becomes `***`, all of it without a `:`. Words without
/// an `@` are left alone.
pub(crate) fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    for c in text.chars() {
        if c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ',' | '(' | ')' | '[' | ']' | '<' | '>') {
            out.push_str(&scrub_word(&word));
            word.clear();
            out.push(c);
        } else {
            word.push(c);
        }
    }
    out.push_str(&scrub_word(&word));
    out
}

fn scrub_word(word: &str) -> String {
    let start = word.find("://").map_or(0, |i| i + 3);
    let Some(at) = word[start..].rfind('@').map(|i| start + i) else {
        return word.to_owned();
    };
    match word[start..at].find(':') {
        Some(colon) => format!("{}:***{}", &word[..start + colon], &word[at..]),
        None => format!("{}***{}", &word[..start], &word[at..]),
    }
}

#[cfg(test)]
mod tests {
    use super::scrub;

    #[test]
    fn hides_passwords_in_any_url() {
        for (text, want) in [
            (
                "error: unexpected argument 'redis://u:hunter2@h:1' found",
                "error: unexpected argument 'redis://u:***@h:1' found",
            ),
            ("rediss://:hunter2@h", "rediss://:***@h"),
            ("bad node URL \"u:hunter2@h:1\": it must", "bad node URL \"u:***@h:1\": it must"),
            ("redis://hunter2@h", "redis://***@h"),
            ("a,redis://u:hunt@er2@h,b", "a,redis://u:***@h,b"),
            ("redis://u:hunter2@h:1,redis://v:hunter3@g:2", "redis://u:***@h:1,redis://v:***@g:2"),
        ] {
            assert_eq!(scrub(text), want);
        }
    }

    #[test]
    fn leaves_other_text_alone() {
        let text = "could not acquire \"job\" within 30s: held by another client (2 of 3 nodes refused)\n";
        assert_eq!(scrub(text), text);
        assert_eq!(scrub("node 0 redis://alice@127.0.0.1:7000"), "node 0 redis://***@127.0.0.1:7000");
    }
}
