//! Agent output as transcript text: cuts the bytes a child prints into transcript entries, and
//! keeps the end of its stderr for a failure message. Pure: no I/O, no clock, no processes; the
//! command harness reads the pipes and writes the transcript (`command/output.rs`).
//!
//! An entry holds one or more whole lines (the final newline removed), or a piece of a line
//! longer than `ENTRY_BYTES`. A line of up to `ENTRY_BYTES` bytes (without its newline) is never
//! split. A longer one is cut only before the first byte of a UTF-8 sequence, and every piece
//! but the last is marked `continued`, so a reader rebuilds each line exactly: join the texts
//! of one stream, putting a newline after each entry that is not `continued`. Bytes are decoded
//! with `String::from_utf8_lossy`; because no cut falls inside a sequence (valid or not), the
//! pieces decode to exactly the text the whole output would: invalid bytes become U+FFFD, valid
//! characters never do, whatever sizes the pipe was read in.

use std::collections::VecDeque;

/// The most bytes of output one entry holds; a longer line is split over several entries.
pub const ENTRY_BYTES: usize = 16 * 1024;

/// One entry's worth of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    /// The last line of `text` goes on in the next piece of the same stream.
    pub continued: bool,
}

/// Cuts one stream's bytes into pieces. Holds at most `limit` bytes plus the last read.
#[derive(Debug)]
pub struct Splitter {
    pending: Vec<u8>,
    limit: usize,
}

impl Default for Splitter {
    fn default() -> Splitter {
        Splitter::with_limit(ENTRY_BYTES)
    }
}

impl Splitter {
    /// A splitter whose pieces hold at most `limit` bytes (at least 4: one character of any
    /// length must fit).
    pub fn with_limit(limit: usize) -> Splitter {
        Splitter {
            pending: Vec::new(),
            limit: limit.max(4),
        }
    }

    /// Takes the next bytes read and appends the pieces that are complete to `out`. Whole
    /// lines are handed out at once; the start of a line waits for its end, or until it is
    /// longer than the limit.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Piece>) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            // A newline at index `limit` still ends a line of `limit` bytes.
            let window = &rest[..rest.len().min(self.limit + 1)];
            if let Some(newline) = window.iter().rposition(|b| *b == b'\n') {
                out.push(Piece {
                    text: String::from_utf8_lossy(&rest[..newline]).into_owned(),
                    continued: false,
                });
                start += newline + 1;
            } else if rest.len() > self.limit {
                let cut = boundary(rest, self.limit);
                out.push(Piece {
                    text: String::from_utf8_lossy(&rest[..cut]).into_owned(),
                    continued: true,
                });
                start += cut;
            } else {
                break;
            }
        }
        self.pending.drain(..start);
    }

    /// What is left at the end of the stream: a last line without a newline.
    pub fn finish(&mut self) -> Option<Piece> {
        if self.pending.is_empty() {
            return None;
        }
        let bytes = std::mem::take(&mut self.pending);
        Some(Piece {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            continued: false,
        })
    }
}

/// Where to cut `bytes` (longer than `limit`) at or before `limit`: before the sequence that
/// would straddle `limit`, else at `limit`. A byte that is not a continuation byte (`10xxxxxx`)
/// always starts a new sequence for a UTF-8 decoder, so cutting before one never changes how
/// either side decodes. A sequence is at most 4 bytes, so only the last 3 bytes can start one
/// that straddles the cut.
fn boundary(bytes: &[u8], limit: usize) -> usize {
    for back in 1..=3 {
        let i = limit - back;
        let b = bytes[i];
        if b & 0xC0 != 0x80 {
            let len = match b {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => 1,
            };
            return if i + len > limit { i } else { limit };
        }
    }
    limit
}

/// The lines of stderr kept for a failure message.
pub const TAIL_LINES: usize = 8;
/// Characters kept of each line of the tail; a longer line is cut there and ends with `…`.
pub const TAIL_LINE_CHARS: usize = 300;

/// The last non-blank lines of a stream, each cut to `TAIL_LINE_CHARS` characters, whether the
/// line ended with a newline or is the unterminated end of the output. Holds at most
/// `TAIL_LINES + 1` lines of `TAIL_LINE_CHARS` characters, however long the lines are.
#[derive(Debug, Default)]
pub struct Tail {
    lines: VecDeque<String>,
    /// The line being read, cut already.
    current: String,
    current_chars: usize,
    current_cut: bool,
}

impl Tail {
    pub fn push(&mut self, piece: &Piece) {
        let mut segments = piece.text.split('\n').peekable();
        while let Some(segment) = segments.next() {
            self.extend(segment);
            if segments.peek().is_some() || !piece.continued {
                self.end_line();
            }
        }
    }

    fn extend(&mut self, text: &str) {
        for c in text.chars() {
            if self.current_chars == TAIL_LINE_CHARS {
                self.current_cut = true;
                return;
            }
            self.current.push(c);
            self.current_chars += 1;
        }
    }

    fn end_line(&mut self) {
        let line = finish_line(&self.current, self.current_cut);
        self.current.clear();
        self.current_chars = 0;
        self.current_cut = false;
        if let Some(line) = line {
            self.lines.push_back(line);
            if self.lines.len() > TAIL_LINES {
                self.lines.pop_front();
            }
        }
    }

    /// The last `TAIL_LINES` non-blank lines, a line still without its newline included.
    pub fn text(&self) -> String {
        let mut lines: Vec<String> = self.lines.iter().cloned().collect();
        lines.extend(finish_line(&self.current, self.current_cut));
        let skip = lines.len().saturating_sub(TAIL_LINES);
        lines[skip..].join("\n")
    }
}

/// A tail line as shown: trailing whitespace (a `\r`, say) removed, `…` where it was cut;
/// `None` for a blank line.
fn finish_line(line: &str, cut: bool) -> Option<String> {
    let line = line.trim_end();
    if line.trim_start().is_empty() {
        return None;
    }
    let mut line = line.to_string();
    if cut {
        line.push('…');
    }
    Some(line)
}

/// Rebuilds the text of one stream from its pieces: each piece that is not `continued` ends a
/// line. What a transcript reader does; here for the tests.
pub fn rebuild<'a>(pieces: impl IntoIterator<Item = &'a Piece>) -> String {
    let mut text = String::new();
    for piece in pieces {
        text.push_str(&piece.text);
        if !piece.continued {
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn split(input: &[u8], reads: &[usize], limit: usize) -> Vec<Piece> {
        let mut splitter = Splitter::with_limit(limit);
        let mut out = Vec::new();
        let mut rest = input;
        let mut sizes = reads.iter().cycle();
        while !rest.is_empty() {
            let n = sizes.next().copied().unwrap_or(1).clamp(1, rest.len());
            splitter.push(&rest[..n], &mut out);
            rest = &rest[n..];
        }
        out.extend(splitter.finish());
        out
    }

    /// What the pieces must rebuild to: the whole input decoded at once, every line ended.
    fn expected(input: &[u8]) -> String {
        let mut text = String::from_utf8_lossy(input).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    #[test]
    fn a_long_line_of_three_byte_characters_keeps_every_character() {
        let line = "€".repeat(30_000);
        let input = format!("{line}\n");
        for reads in [[8192].as_slice(), &[1], &[7, 8192, 3], &[65_536]] {
            let pieces = split(input.as_bytes(), reads, ENTRY_BYTES);
            assert_eq!(rebuild(&pieces), input);
            assert!(pieces.iter().all(|p| !p.text.contains('\u{FFFD}')));
            assert!(pieces.iter().all(|p| p.text.len() <= ENTRY_BYTES));
            assert!(pieces[..pieces.len() - 1].iter().all(|p| p.continued));
            assert!(!pieces[pieces.len() - 1].continued);
        }
    }

    #[test]
    fn a_line_that_fits_is_never_split_however_it_is_read() {
        let line = "é".repeat(ENTRY_BYTES / 2);
        assert_eq!(line.len(), ENTRY_BYTES);
        let input = format!("a\n{line}\nb\n");
        for reads in [[1].as_slice(), &[3], &[8192], &[ENTRY_BYTES + 1]] {
            let pieces = split(input.as_bytes(), reads, ENTRY_BYTES);
            assert!(pieces.iter().all(|p| !p.continued), "{reads:?}");
            assert!(pieces.iter().any(|p| p.text.split('\n').any(|l| l == line)));
            assert_eq!(rebuild(&pieces), input);
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters_as_in_one_decoding() {
        let input = b"ok \xff\xfe \xe2\x82 end \xf0\x9f\x98\n\xc3";
        for limit in 4..12 {
            for read in 1..5 {
                assert_eq!(
                    rebuild(&split(input, &[read], limit)),
                    expected(input),
                    "limit {limit}, read {read}"
                );
            }
        }
    }

    #[test]
    fn the_tail_cuts_every_line_the_same_way() {
        let mut tail = Tail::default();
        let long = "x".repeat(1_150);
        tail.push(&Piece {
            text: format!("first\n\n{long}\n  \r"),
            continued: false,
        });
        // An unterminated last line, over several pieces, cut by the same rule.
        tail.push(&Piece {
            text: "€".repeat(200),
            continued: true,
        });
        tail.push(&Piece {
            text: "é".repeat(200),
            continued: true,
        });
        let text = tail.text();
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], format!("{}…", "x".repeat(300)));
        assert_eq!(lines[2], format!("{}{}…", "€".repeat(200), "é".repeat(100)));
        for n in 0..20 {
            tail.push(&Piece {
                text: format!("line {n}"),
                continued: false,
            });
        }
        assert_eq!(tail.text().lines().count(), TAIL_LINES);
        assert!(tail.text().ends_with("line 19"));
    }

    fn output() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            4 => "[a-z €é😀\u{7ff}\u{10ffff}]{0,40}".prop_map(String::into_bytes),
            1 => Just(b"\n".to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 0..6),
        ];
        proptest::collection::vec(piece, 0..60).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn pieces_rebuild_the_decoded_output(
            input in output(),
            reads in proptest::collection::vec(1usize..50, 1..8),
            limit in 4usize..64,
        ) {
            let pieces = split(&input, &reads, limit);
            prop_assert_eq!(rebuild(&pieces), expected(&input));
            if input.split(|b| *b == b'\n').all(|line| line.len() <= limit) {
                prop_assert!(pieces.iter().all(|p| !p.continued));
            }
            for p in &pieces {
                // Bytes in: at most `limit`, so at most three times that after replacement.
                prop_assert!(p.text.len() <= 3 * limit);
            }
        }
    }
}
