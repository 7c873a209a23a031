//! Pages of a run's event history (`GET /agent/runs/{id}/events` without
//! `Accept: text/event-stream`). A page is serialised one event at a time as the log is read,
//! so a request holds at most one page of JSON (`limit` events, and no more than
//! `PAGE_BYTES` past the first event), however long the history is. The bytes are exactly what
//! serde_json writes for `wire::RunEvents`, the type the OpenAPI document describes. Reads
//! the log only through the iterator it is given; knows nothing of sled or actors.

use super::wire::RunEvent;
use runledger_domain::RunId;
use runledger_runs::actor::Envelope;

/// JSON bytes after which a page ends even before `limit` events: enough for about a thousand
/// typical events, small enough that many clients paging at once stay within bounded memory.
pub const PAGE_BYTES: usize = 1 << 20;

/// The JSON of one page: the events `events` yields, up to `limit` of them, ending early once
/// the page holds `budget` bytes (but never before its first event). `next` is set when the
/// iterator has another event after the page.
pub fn page<E>(
    run_id: RunId,
    events: impl Iterator<Item = Result<Envelope, E>>,
    limit: usize,
    budget: usize,
) -> Result<Vec<u8>, E> {
    let mut events = events.peekable();
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"run_id\":");
    write(&mut out, &run_id.to_string());
    out.extend_from_slice(b",\"events\":[");
    let mut count = 0;
    let mut last = None;
    while count < limit && (count == 0 || out.len() < budget) {
        let Some(event) = events.next() else { break };
        let event = event?;
        if count > 0 {
            out.push(b',');
        }
        write(&mut out, &RunEvent::from(&event));
        last = Some(event.seq);
        count += 1;
    }
    out.push(b']');
    // A damaged record after the page is the next page's error; this one is whole.
    if let (Some(seq), Some(_)) = (last, events.peek()) {
        out.extend_from_slice(b",\"next\":");
        write(&mut out, &seq);
    }
    out.push(b'}');
    Ok(out)
}

fn write(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    // Writing plain structs and string-keyed maps to a vector cannot fail.
    let _ = serde_json::to_writer(out, value);
}

/// The page `page` writes, as the struct (for tests).
#[cfg(test)]
fn expected(run_id: RunId, events: &[Envelope], next: Option<u64>) -> Vec<u8> {
    serde_json::to_vec(&super::wire::RunEvents {
        run_id: run_id.to_string(),
        events: events.iter().map(RunEvent::from).collect(),
        next,
    })
    .expect("serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{Event, FollowupMode, Timestamp};

    fn history(n: u64) -> Vec<Envelope> {
        (0..n)
            .map(|seq| Envelope {
                run_id: RunId(5),
                seq,
                at: Timestamp(1_000 + seq),
                origin: None,
                event: Event::FollowupReceived {
                    message: format!("message {seq} \u{0} \"é\""),
                    mode: FollowupMode::Plan,
                    by: "key".into(),
                },
            })
            .collect()
    }

    fn ok(events: &[Envelope]) -> impl Iterator<Item = Result<Envelope, ()>> + '_ {
        events.iter().cloned().map(Ok)
    }

    #[test]
    fn a_page_is_byte_for_byte_what_serde_writes_for_the_struct() {
        let log = history(10);
        let id = RunId(5);
        let page_of = |limit, budget| page(id, ok(&log), limit, budget).expect("page");
        assert_eq!(page_of(100, PAGE_BYTES), expected(id, &log, None));
        assert_eq!(page_of(10, PAGE_BYTES), expected(id, &log, None));
        assert_eq!(page_of(4, PAGE_BYTES), expected(id, &log[..4], Some(3)));
        assert_eq!(
            page(id, ok(&[]), 5, 10).expect("page"),
            expected(id, &[], None)
        );
        // The byte budget ends a page early, but never before its first event.
        assert_eq!(page_of(100, 1), expected(id, &log[..1], Some(0)));
        let one = expected(id, &log[..1], None).len();
        let short = page_of(100, one + 10);
        assert_eq!(short, expected(id, &log[..2], Some(1)));
    }

    #[test]
    fn a_damaged_record_fails_the_page_it_falls_in_only() {
        let log = history(3);
        let id = RunId(5);
        let damaged = || {
            log.iter()
                .cloned()
                .map(Ok)
                .chain(std::iter::once(Err("damaged")))
        };
        assert_eq!(
            page(id, damaged(), 3, PAGE_BYTES).expect("page"),
            expected(id, &log, Some(2))
        );
        assert_eq!(page(id, damaged(), 4, PAGE_BYTES), Err("damaged"));
    }
}
