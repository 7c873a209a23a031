//! Text as HTML, for the pages the server renders (the session page and the console): the
//! markup characters escaped and control characters made visible. It knows nothing of pages,
//! requests or runs.

/// Text as HTML: the markup characters escaped, and control characters (which HTML does not
/// allow in a document, and which a terminal would act on) shown as the Unicode symbols for
/// them (`␀` for NUL, `␛` for ESC, `␡` for DEL). Tab and newline stay; C1 controls, which
/// have no symbol, are dropped.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'))
            }
            '\u{7f}' => out.push('\u{2421}'),
            '\u{80}'..='\u{9f}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_as_symbols_or_dropped() {
        assert_eq!(
            escape("a\u{0}\u{1b}[1m\r\u{7f}\u{85}\t\n<&>\"'é"),
            "a␀␛[1m␍␡\t\n&lt;&amp;&gt;&quot;&#39;é"
        );
    }
}
