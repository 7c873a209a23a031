//! A child's output: read in fixed-size chunks (`pump`), moved through a bounded channel,
//! written to the transcript (`Output::record`) with the tail of stderr kept, and handed as
//! whole lines to a preset's observer. Memory stays bounded whatever the agent prints; this
//! module decides nothing about the execution's outcome.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::mpsc;

use crate::lines::{Piece, Splitter, Tail};
use crate::observe::Observer;
use crate::transcript::{Entry, Writer};

/// Bytes asked for per read of an agent's stdout or stderr.
const CHUNK: usize = 8 * 1024;

/// Streams a child's output to the transcript, keeping the tail of stderr, and hands a
/// preset's whole output lines to its observer.
pub(super) struct Output {
    pub(super) rx: mpsc::Receiver<(&'static str, Piece)>,
    stderr_tail: Tail,
    pub(super) observer: Option<Observer>,
    stdout_line: Line,
    stderr_line: Line,
    /// Per stream (stdout, stderr): the end of its last `continued` piece, held back from the
    /// transcript until the stream's next piece, so that a secret's value printed across the
    /// cut between two entries is whole in one entry when the redactor sees it.
    held: [String; 2],
}

/// The most bytes of one output line that are reassembled for the observer; a longer line
/// (no CLI event is that large) is skipped rather than held in memory.
const LINE_LIMIT: usize = 4 * 1024 * 1024;

/// Reassembles whole lines from the pieces `lines.rs` cut (a piece may hold several lines,
/// and a long line is spread over `continued` pieces).
#[derive(Default)]
struct Line {
    carry: String,
    overflow: bool,
}

impl Line {
    fn feed(&mut self, piece: &Piece, mut each: impl FnMut(&str)) {
        let text = piece.text.as_str();
        let (whole, rest) = if piece.continued {
            match text.rfind('\n') {
                Some(i) => (Some(&text[..i]), &text[i + 1..]),
                None => (None, text),
            }
        } else {
            (Some(text), "")
        };
        if let Some(whole) = whole {
            let mut lines = whole.split('\n');
            if let Some(first) = lines.next() {
                if !self.overflow && self.carry.len() + first.len() <= LINE_LIMIT {
                    self.carry.push_str(first);
                    each(&self.carry);
                }
                self.carry.clear();
                self.overflow = false;
            }
            for line in lines {
                each(line);
            }
        }
        if !self.overflow {
            if self.carry.len() + rest.len() > LINE_LIMIT {
                self.carry.clear();
                self.overflow = true;
            } else {
                self.carry.push_str(rest);
            }
        }
    }
}

/// Reads one stream and hands its pieces (`lines.rs`) to the supervising loop.
fn pump(
    stream: &'static str,
    mut reader: impl AsyncRead + Unpin + Send + 'static,
    tx: mpsc::Sender<(&'static str, Piece)>,
) {
    tokio::spawn(async move {
        let mut splitter = Splitter::default();
        let mut buf = vec![0u8; CHUNK];
        let mut pieces = Vec::new();
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            splitter.push(&buf[..n], &mut pieces);
            for piece in pieces.drain(..) {
                if tx.send((stream, piece)).await.is_err() {
                    return;
                }
            }
        }
        if let Some(piece) = splitter.finish() {
            let _ = tx.send((stream, piece)).await;
        }
    });
}

impl Output {
    pub(super) fn start(child: &mut Child, observer: Option<Observer>) -> Output {
        // Bounded: a fast writer waits for the transcript instead of filling memory.
        let (tx, rx) = mpsc::channel(16);
        if let Some(out) = child.stdout.take() {
            pump("stdout", out, tx.clone());
        }
        if let Some(err) = child.stderr.take() {
            pump("stderr", err, tx);
        }
        Output {
            rx,
            stderr_tail: Tail::default(),
            observer,
            stdout_line: Line::default(),
            stderr_line: Line::default(),
            held: Default::default(),
        }
    }

    pub(super) fn record(
        &mut self,
        writer: &mut Writer,
        execution: u32,
        stream: &'static str,
        piece: Piece,
    ) -> std::io::Result<()> {
        let mut readable = Vec::new();
        if let Some(observer) = self.observer.as_mut() {
            if stream == "stdout" {
                self.stdout_line
                    .feed(&piece, |l| readable.extend(observer.stdout_line(l)));
            } else {
                self.stderr_line.feed(&piece, |l| observer.stderr_line(l));
            }
        }
        let at = runledger_base::clock::now();
        let held = &mut self.held[usize::from(stream == "stderr")];
        let mut text = std::mem::take(held);
        text.push_str(&piece.text);
        if piece.continued {
            // Moving bytes from the end of a continued entry to the start of the next one of
            // the same stream keeps what a reader rebuilds (a continued entry adds no newline).
            let mut cut = text.len().saturating_sub(writer.redaction_window());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            *held = text.split_off(cut);
        }
        if stream == "stderr" {
            // What a failure's message quotes is what the transcript holds: redacted, with a
            // value cut between two pieces whole (see `held`), before the tail cuts lines.
            self.stderr_tail.push(&Piece {
                text: writer.redactor().apply(&text).into_owned(),
                continued: piece.continued,
            });
        }
        if !text.is_empty() || !piece.continued {
            writer.append(&Entry {
                at,
                execution,
                stream: stream.into(),
                text,
                continued: piece.continued,
            })?;
        }
        // After the raw line it was read from, so a reader sees both in order.
        for text in readable {
            writer.append(&Entry {
                at,
                execution,
                stream: "agent".into(),
                text,
                continued: false,
            })?;
        }
        Ok(())
    }

    /// Drains what is left after the process exited (bounded in time: a background child may
    /// keep the pipe open until the tree is stopped).
    pub(super) async fn drain(
        &mut self,
        writer: &mut Writer,
        execution: u32,
    ) -> std::io::Result<()> {
        let deadline = tokio::time::sleep(Duration::from_secs(2));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                item = self.rx.recv() => match item {
                    Some((stream, piece)) => self.record(writer, execution, stream, piece)?,
                    None => return Ok(()),
                },
                _ = &mut deadline => return Ok(()),
            }
        }
    }

    pub(super) fn tail(&self) -> String {
        self.stderr_tail.text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::harness::Harness;

    /// Feeds `bytes` through the transcript's splitter in reads of `read` bytes and returns the
    /// lines `Line` hands on.
    fn lines_of(bytes: &[u8], read: usize) -> Vec<String> {
        let mut splitter = Splitter::default();
        let mut line = Line::default();
        let mut pieces = Vec::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(read) {
            splitter.push(chunk, &mut pieces);
        }
        pieces.extend(splitter.finish());
        for piece in &pieces {
            line.feed(piece, |l| out.push(l.to_string()));
        }
        out
    }

    #[test]
    fn long_json_lines_reach_the_observer_whole_whatever_the_reads() {
        // A final result far longer than one transcript entry, between two short lines.
        let long = format!(
            r#"{{"type":"result","is_error":true,"result":"{}","session_id":"s-1"}}"#,
            "é".repeat(60_000)
        );
        let text = format!("{{\"type\":\"init\"}}\n{long}\nlast");
        for read in [1, 7, 4096, 100_000] {
            let lines = lines_of(text.as_bytes(), read);
            assert_eq!(lines.len(), 3, "read {read}");
            assert_eq!(lines[1], long, "read {read}");
            assert_eq!(lines[2], "last");
            let mut observer = Observer::new(Harness::Claude);
            for l in &lines {
                let _ = observer.stdout_line(l);
            }
            assert_eq!(observer.session(), Some("s-1"));
        }
    }

    #[test]
    fn a_line_beyond_the_limit_is_skipped_and_the_next_one_is_whole() {
        let huge = "x".repeat(LINE_LIMIT + 10);
        let text = format!("{huge}\n{{\"type\":\"init\",\"session_id\":\"g-2\"}}\n");
        let lines = lines_of(text.as_bytes(), 65_536);
        assert_eq!(lines, [r#"{"type":"init","session_id":"g-2"}"#]);
    }
}
