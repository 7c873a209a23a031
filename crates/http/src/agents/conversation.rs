//! A run's conversation as the Oz clients read it, built from its transcript and the
//! follow-ups its history records: which output shows, under which role, in which step. It is
//! pure: reading the transcript and the history is `reads`'.

use std::collections::HashMap;

use super::step::Step;
use crate::problem::ApiError;
use crate::wire::{ConversationContentBlock, ConversationMessageRole, ConversationResponse};
use runledger_domain::{Run, Timestamp};
use runledger_runs::transcript::Entry;

/// The most of a transcript one conversation holds (its latest 1 MiB), and the most of the
/// follow-ups' messages. Earlier output is left out (and said to be), so the answer stays
/// bounded whatever the agent printed or was sent.
pub const CONVERSATION_MAX_BYTES: u64 = 1024 * 1024;

/// A follow-up as the run's events record it, with the execution it went to: the one in
/// progress when it arrived, or else the next one (which it starts or waits for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The sequence number of its `FollowupReceived` event.
    pub seq: u64,
    pub at: Timestamp,
    pub execution: u32,
    pub message: String,
}

/// The follow-ups of a run's history received at `since` or later: the latest of them, at most
/// `CONVERSATION_MAX_BYTES` of messages, oldest first.
pub(super) fn followups(
    events: impl Iterator<Item = Result<runledger_runs::actor::Envelope, runledger_runs::actor::Error>>,
    since: Timestamp,
) -> Result<Vec<Asked>, ApiError> {
    use runledger_domain::Event;
    let mut asked = std::collections::VecDeque::new();
    let mut bytes = 0;
    let (mut started, mut running) = (0, false);
    for envelope in events {
        let envelope = envelope?;
        match envelope.event {
            Event::Started { execution } | Event::StartedOn { execution, .. } => {
                (started, running) = (execution, true)
            }
            Event::Succeeded { .. }
            | Event::Failed { .. }
            | Event::Cancelled { .. }
            | Event::Lost { .. } => running = false,
            Event::FollowupReceived { message, .. } if envelope.at >= since => {
                bytes += message.len();
                asked.push_back(Asked {
                    seq: envelope.seq,
                    at: envelope.at,
                    execution: if running { started } else { started + 1 },
                    message,
                });
                while bytes > CONVERSATION_MAX_BYTES as usize {
                    match asked.pop_front() {
                        Some(old) => bytes -= old.message.len(),
                        None => break,
                    }
                }
            }
            _ => {}
        }
    }
    Ok(asked.into())
}

/// A run's conversation: its prompt, then the latest `CONVERSATION_MAX_BYTES` of its
/// transcript (`entries`, from byte `start`) with the follow-ups of its history (`asked`), one
/// step per execution. Follow-ups are user messages, placed by when they arrived among the
/// output of the execution they went to; the agent's readable output (its `agent` entries, or
/// its stdout when it has none) is assistant text, the harness's notes system text and stderr
/// system events. The transcript's own `followup` entries (where the agent took a follow-up)
/// are left out, as the history's record stands for them. Consecutive blocks of one role make
/// one message, and the pieces of a long line are joined.
pub fn conversation(
    run: &Run,
    entries: &[(u64, Entry)],
    start: u64,
    asked: &[Asked],
) -> ConversationResponse {
    let lines = joined_lines(entries);
    let first_execution = match (lines.first(), asked.first()) {
        (Some((_, e)), Some(a)) => e.execution.min(a.execution),
        (Some((_, e)), None) => e.execution,
        (None, Some(a)) => a.execution,
        (None, None) => 1,
    };
    let mut steps = vec![opening(run, entries, start, first_execution)];
    interleave(&mut steps, asked, lines);
    ConversationResponse {
        conversation_id: run.id.to_string(),
        steps: steps.into_iter().map(Step::finish).collect(),
    }
}

/// The transcript's entries shown in the conversation, the pieces of each long line joined:
/// (the offsets of its pieces, the entry with the whole text). The transcript's `followup`
/// entries are left out, and so is stdout when the agent wrote readable (`agent`) output.
fn joined_lines(entries: &[(u64, Entry)]) -> Vec<(Vec<u64>, Entry)> {
    let readable = entries.iter().any(|(_, e)| e.stream == "agent");
    // Pieces of long lines joined: (offsets, entry with the whole text).
    let mut lines: Vec<(Vec<u64>, Entry)> = Vec::new();
    let mut open: HashMap<(u32, &str), usize> = HashMap::new();
    for (offset, e) in entries {
        if e.stream == "followup" || readable && e.stream == "stdout" {
            continue;
        }
        let key = (e.execution, e.stream.as_str());
        let index = match open.remove(&key) {
            Some(i) => {
                lines[i].0.push(*offset);
                lines[i].1.text.push_str(&e.text);
                i
            }
            None => {
                lines.push((vec![*offset], e.clone()));
                lines.len() - 1
            }
        };
        if e.continued {
            open.insert(key, index);
        }
    }
    lines
}

/// The first step: the prompt, and when the transcript was cut, how much was left out.
fn opening(run: &Run, entries: &[(u64, Entry)], start: u64, first_execution: u32) -> Step {
    let mut first = Step::new(first_execution);
    first.push(
        ConversationMessageRole::User,
        "prompt".into(),
        run.created_at,
        ConversationContentBlock::Text {
            message_id: "prompt".into(),
            text: run.prompt.clone(),
        },
    );
    if start > 0 {
        let mut data = serde_json::Map::new();
        data.insert("omitted_bytes".into(), start.into());
        first.push(
            ConversationMessageRole::System,
            "truncated".into(),
            entries.first().map_or(run.created_at, |(_, e)| e.at),
            ConversationContentBlock::Event {
                message_id: "truncated".into(),
                name: "transcript_truncated".into(),
                data,
            },
        );
    }
    first
}

/// Adds the follow-ups and the transcript's lines to `steps`, by execution and then by time,
/// opening a step for each new execution.
fn interleave(steps: &mut Vec<Step>, asked: &[Asked], lines: Vec<(Vec<u64>, Entry)>) {
    let mut asked = asked.iter().peekable();
    let mut lines = lines.into_iter().peekable();
    loop {
        // A follow-up goes before the first output of a later execution, or of its own
        // execution written after it arrived.
        let next_asked = match (asked.peek(), lines.peek()) {
            (Some(a), Some((_, e))) => {
                a.execution < e.execution || a.execution == e.execution && a.at <= e.at
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        // The message's block, and the transcript entries beyond the first that it joins.
        let (execution, role, id, at, block, joined) = if next_asked {
            let Some(a) = asked.next() else { break };
            let id = format!("followup-{}", a.seq);
            let block = ConversationContentBlock::Text {
                message_id: id.clone(),
                text: a.message.clone(),
            };
            let role = ConversationMessageRole::User;
            (a.execution, role, id, a.at, block, Vec::new())
        } else {
            let Some((offsets, entry)) = lines.next() else {
                break;
            };
            let id = offsets.first().copied().unwrap_or_default().to_string();
            let (role, block) = block_of(id.clone(), entry.stream, entry.text);
            let joined = offsets.get(1..).unwrap_or_default().to_vec();
            (entry.execution, role, id, entry.at, block, joined)
        };
        if steps.last().is_none_or(|s| s.execution != execution) {
            steps.push(Step::new(execution));
        }
        if let Some(step) = steps.last_mut() {
            step.push(role, id, at, block);
            for offset in joined {
                step.note_id(offset.to_string());
            }
        }
    }
}

/// The role and content block of a transcript entry of `stream`.
fn block_of(
    id: String,
    stream: String,
    text: String,
) -> (ConversationMessageRole, ConversationContentBlock) {
    match stream.as_str() {
        "agent" | "stdout" => (
            ConversationMessageRole::Assistant,
            ConversationContentBlock::Text {
                message_id: id,
                text,
            },
        ),
        "system" => (
            ConversationMessageRole::System,
            ConversationContentBlock::Text {
                message_id: id,
                text,
            },
        ),
        _ => {
            let mut data = serde_json::Map::new();
            data.insert("text".into(), text.into());
            (
                ConversationMessageRole::System,
                ConversationContentBlock::Event {
                    message_id: id,
                    name: stream,
                    data,
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::format_time;
    use runledger_domain::RunState;

    fn entry(
        offset: u64,
        execution: u32,
        stream: &str,
        text: &str,
        continued: bool,
    ) -> (u64, Entry) {
        (
            offset,
            Entry {
                at: Timestamp(2_000_000 + offset),
                execution,
                stream: stream.into(),
                text: text.into(),
                continued,
            },
        )
    }

    /// (step, role, texts) of every message.
    fn shape(c: &ConversationResponse) -> Vec<(String, ConversationMessageRole, Vec<String>)> {
        c.steps
            .iter()
            .flat_map(|s| {
                s.messages.iter().map(|m| {
                    let texts = m
                        .content
                        .iter()
                        .map(|b| match b {
                            ConversationContentBlock::Text { text, .. } => text.clone(),
                            ConversationContentBlock::Event { name, .. } => format!("<{name}>"),
                        })
                        .collect();
                    (s.id.clone(), m.role, texts)
                })
            })
            .collect()
    }

    fn run() -> Run {
        let mut run = runledger_domain::sample_run(1);
        run.prompt = "fix the build".into();
        run.state = RunState::Succeeded;
        run
    }

    #[test]
    fn readable_output_stands_in_for_raw_json_and_followups_go_where_they_arrived() {
        use ConversationMessageRole::{Assistant, System, User};
        let entries = [
            entry(0, 1, "system", "setup done", false),
            entry(10, 1, "stdout", "{\"raw\":1}", false),
            entry(20, 1, "agent", "looking", false),
            // Where the agent took the follow-up: the history's record stands for it.
            entry(30, 1, "followup", "(plan) and the tests", false),
            entry(40, 1, "stderr", "warn", false),
            entry(50, 1, "agent", "a long ", true),
            entry(60, 1, "agent", "line", false),
            entry(80, 2, "agent", "done", false),
        ];
        let asked = [
            Asked {
                seq: 7,
                at: Timestamp(2_000_025),
                execution: 1,
                message: "and the tests".into(),
            },
            // Resumed the finished run: the first thing of execution 2.
            Asked {
                seq: 12,
                at: Timestamp(2_000_070),
                execution: 2,
                message: "once more".into(),
            },
        ];
        let c = conversation(&run(), &entries, 0, &asked);
        let e1 = "execution-1".to_string();
        let e2 = "execution-2".to_string();
        assert_eq!(
            shape(&c),
            [
                (e1.clone(), User, vec!["fix the build".to_string()]),
                (e1.clone(), System, vec!["setup done".into()]),
                (e1.clone(), Assistant, vec!["looking".into()]),
                (e1.clone(), User, vec!["and the tests".into()]),
                (e1.clone(), System, vec!["<stderr>".into()]),
                (e1, Assistant, vec!["a long line".into()]),
                (e2.clone(), User, vec!["once more".into()]),
                (e2, Assistant, vec!["done".into()]),
            ]
        );
        assert_eq!(c.steps[0].messages[3].message_ids, ["followup-7"]);
        let joined = &c.steps[0].messages[5];
        assert_eq!(joined.message_ids, ["50", "60"]);
        assert_eq!(c.steps[0].started_at, Some(format_time(run().created_at)));
        assert_eq!(
            c.steps[1].started_at,
            Some(format_time(Timestamp(2_000_070)))
        );
        assert_eq!(
            c.steps[1].completed_at,
            Some(format_time(Timestamp(2_000_080)))
        );
    }

    #[test]
    fn a_followup_to_a_run_not_started_again_is_its_own_step() {
        let entries = [entry(0, 1, "stdout", "done", false)];
        let asked = [Asked {
            seq: 9,
            at: Timestamp(2_000_100),
            execution: 2,
            message: "queued".into(),
        }];
        let steps: Vec<String> = conversation(&run(), &entries, 0, &asked)
            .steps
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(steps, ["execution-1", "execution-2"]);
    }

    #[test]
    fn a_cut_transcript_says_how_much_was_left_out() {
        let entries = [entry(5_000, 3, "stdout", "tail", false)];
        let c = conversation(&run(), &entries, 5_000, &[]);
        let shape = shape(&c);
        assert_eq!(shape[0].0, "execution-3");
        assert_eq!(shape[1].2, ["<transcript_truncated>"]);
        assert_eq!(shape[2].2, ["tail"]);
    }

    #[test]
    fn followups_go_to_the_execution_they_reach_and_stay_bounded() {
        use runledger_domain::{Event, FollowupMode};
        let run_id = run().id;
        let at = |seq: u64, event: Event| runledger_runs::actor::Envelope {
            run_id,
            seq,
            at: Timestamp(seq * 10),
            origin: None,
            event,
        };
        let asked = |message: &str| Event::FollowupReceived {
            message: message.into(),
            mode: FollowupMode::Normal,
            by: "key".into(),
        };
        let big = "x".repeat(CONVERSATION_MAX_BYTES as usize / 2 + 1);
        let history = vec![
            at(1, asked("before the start")),
            at(2, Event::Started { execution: 1 }),
            at(3, asked("while running")),
            at(4, Event::Succeeded { execution: 1 }),
            at(5, asked("resumes it")),
            at(6, asked(&big)),
            at(7, asked(&big)),
        ];
        fn ok(
            events: &[runledger_runs::actor::Envelope],
        ) -> impl Iterator<
            Item = Result<runledger_runs::actor::Envelope, runledger_runs::actor::Error>,
        > + '_ {
            events.iter().cloned().map(Ok)
        }
        let got = followups(ok(&history), Timestamp(0)).expect("history");
        // The two large ones do not fit together: the older is dropped, and so is all before.
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].seq, got[0].execution), (7, 2));
        let small = &history[..5];
        let got: Vec<(u64, u32)> = followups(ok(small), Timestamp(0))
            .expect("history")
            .iter()
            .map(|a| (a.seq, a.execution))
            .collect();
        assert_eq!(got, [(1, 1), (3, 1), (5, 2)]);
        // Only those from when the shown output begins.
        let since = followups(ok(small), Timestamp(30)).expect("history");
        assert_eq!(since.iter().map(|a| a.seq).collect::<Vec<_>>(), [3, 5]);
    }
}
