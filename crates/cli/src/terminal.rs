//! What the CLI prints of text it did not write itself — an agent's output, titles, status
//! messages, artifact fields, anything a run's history holds — made safe for the operator's
//! terminal. The terminal is the operator's: an agent must not set its title, write its
//! clipboard (OSC 52), move its cursor or erase what it shows, and must not print a line that
//! passes for one of the CLI's own (`[system] …`, `[runledger] …`).
//!
//! Every control character but tab and newline (C0, DEL and the C1 range U+0080–U+009F) is
//! shown as a `\xNN` escape of its code point: `ESC` is `\x1b`, `CSI` (U+009B) is `\x9b`. A
//! backslash is printed as it is, so the escape only says what a character was; it cannot
//! make the terminal act. JSON the CLI prints is kept valid JSON: there the same characters
//! are `\u00NN` escapes of the string that holds them.
//!
//! Pure: text in, text out. Callers decide where it goes; nothing here writes.

use std::borrow::Cow;

/// Whether a character is one a terminal may act on: every control character (C0, DEL, C1)
/// but tab and newline.
fn acts(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\n'
}

/// Where a text printed comes from, which says whether its lines are marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A field of an answer or a note: escaped only (the CLI puts it after a label or marker
    /// of its own).
    Field,
    /// An agent's text that starts a line.
    AgentLine,
    /// An agent's text that goes on a line already begun: only the lines after its first
    /// newline start there.
    AgentRest,
}

/// `text` with every control character but tab and newline escaped (`\x1b`), and, for an
/// agent's text, every line that starts in it and begins like one of the CLI's own lines
/// (`[word]`) marked with a backslash (`\[system]`), so that an agent's output cannot pass for
/// the CLI's. Borrowed when nothing needed a change.
pub fn printable(text: &str, origin: Origin) -> Cow<'_, str> {
    let agent = origin != Origin::Field;
    let mark = |line_start: usize| agent && looks_like_ours(&text[line_start..]);
    let first = origin == Origin::AgentLine && mark(0);
    let needs_change = first
        || text.chars().any(acts)
        || (agent && text.match_indices('\n').any(|(i, _)| mark(i + 1)));
    if !needs_change {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    if first {
        out.push('\\');
    }
    for (i, c) in text.char_indices() {
        if acts(c) {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
        if c == '\n' && mark(i + 1) {
            out.push('\\');
        }
    }
    Cow::Owned(out)
}

/// Whether a line begins like the CLI's own: `[`, a word of letters, digits, `-` or `_`, `]`.
fn looks_like_ours(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('[') else {
        return false;
    };
    match rest.find(']') {
        Some(end) => {
            end > 0
                && rest[..end]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        }
        None => false,
    }
}

/// A JSON document as the CLI prints it: serde_json escapes C0 characters already; DEL and the
/// C1 range are escaped here as `\u00NN`. Those characters can stand only inside strings in
/// serialized JSON, so the result is the same JSON value.
pub fn json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    if !text.chars().any(acts) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acts(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_but_tab_and_newline_are_escaped() {
        let hostile = "a\x1b]0;title\x07b\x1b]52;c;aGk=\x07c\x1b[2K\x1b[1Ad\u{9b}31me\r\x7f\0";
        assert_eq!(
            printable(hostile, Origin::Field),
            "a\\x1b]0;title\\x07b\\x1b]52;c;aGk=\\x07c\\x1b[2K\\x1b[1Ad\\x9b31me\\x0d\\x7f\\x00"
        );
        assert_eq!(
            printable("tab\there\nnext", Origin::Field),
            "tab\there\nnext"
        );
        assert!(matches!(
            printable("plain [system] text", Origin::AgentLine),
            Cow::Borrowed(_)
        ));
        // Characters past C1 are text, not controls.
        assert_eq!(printable("é ␛ \u{a0}", Origin::AgentLine), "é ␛ \u{a0}");
        for c in (0u32..=0x9f).filter_map(char::from_u32) {
            let shown = printable(&c.to_string(), Origin::AgentRest).into_owned();
            let safe = shown
                .chars()
                .all(|s| !s.is_control() || s == '\t' || s == '\n');
            assert!(safe, "{c:?} shown as {shown:?}");
        }
    }

    #[test]
    fn an_agent_line_that_looks_like_the_clis_own_is_marked() {
        assert_eq!(
            printable("[system] run succeeded", Origin::AgentLine),
            "\\[system] run succeeded"
        );
        assert_eq!(
            printable("out\n[runledger] note\n[x] [y]\n", Origin::AgentLine),
            "out\n\\[runledger] note\n\\[x] [y]\n"
        );
        // The rest of a line already begun is not a line start.
        assert_eq!(
            printable("[system] more", Origin::AgentRest),
            "[system] more"
        );
        // A field of the CLI's is not marked.
        assert_eq!(printable("[system] ok", Origin::Field), "[system] ok");
        // Lines that are not `[word]` keep their form: JSON arrays, links, empty brackets.
        for line in ["[1, 2]", "[] empty", "[a b] c", "[unclosed", "x [system]"] {
            assert_eq!(printable(line, Origin::AgentLine), line);
        }
        // An escape cannot hide the mark: the `[` after an escaped ESC is not a line start,
        // and a carriage return is shown, not obeyed.
        assert_eq!(
            printable("x\r[system] done", Origin::AgentLine),
            "x\\x0d[system] done"
        );
    }

    #[test]
    fn json_keeps_its_value_and_loses_its_controls() {
        let value = serde_json::json!({"t": "a\u{1b}[2K\u{9b}1A\u{7f}b", "n": 1});
        let shown = json(&value);
        assert!(!shown.chars().any(acts), "{shown}");
        assert!(
            shown.contains("\\u001b") && shown.contains("\\u009b"),
            "{shown}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).expect("json");
        assert_eq!(back, value);
    }
}
