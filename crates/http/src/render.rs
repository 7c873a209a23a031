//! The JSON of runs as the API answers them (`RunItem`), and a bounded cache of it. Clients
//! poll: a dashboard lists the same first page every few seconds, a CI job gets its run until
//! it finishes. Rendering a run is most of a list's CPU (serde_json escapes every string byte
//! by byte, and the times are formatted each time), yet a run's JSON changes only with its
//! events: it is a pure function of the run at one sequence number, the server's public URL and
//! session secret (fixed for the cache's life), the expiry of its `session_link` (which moves
//! once a step, a day at most: `wire::token`), and, for a run in progress only, the clock
//! (`run_time` counts the live execution). So the cache keeps the bytes of each run it rendered,
//! keyed by run id and checked against the run's `next_seq` and the link's expiry; a run in
//! progress is rendered every time.

use std::collections::HashMap;
use std::sync::Mutex;

use actix_web::web::Bytes;

use super::wire::{Links, PageInfo, RunItem};
use runledger_domain::{Run, RunId, RunState};

/// What the cache holds by default: about 1,500 runs of typical size, a little more than a
/// megabyte of memory with the map.
pub const DEFAULT_BUDGET: usize = 1 << 20;

/// What a rendering of a run depends on besides the fixed parts: the run's `next_seq` and its
/// session link's expiry, in this order (a later event always wins).
type Version = (u64, u64);

/// Rendered runs by id, with the version each was rendered at.
pub struct RenderCache {
    inner: Mutex<Inner>,
    /// Bytes of JSON held at most; reaching it empties the cache (see `insert`).
    budget: usize,
}

#[derive(Default)]
struct Inner {
    items: HashMap<RunId, (Version, Bytes)>,
    bytes: usize,
}

impl RenderCache {
    pub fn new(budget: usize) -> RenderCache {
        RenderCache {
            inner: Mutex::new(Inner::default()),
            budget,
        }
    }

    /// The run's JSON, from the cache when it holds the run at this sequence number.
    pub fn run(&self, run: &Run, links: &Links<'_>) -> Result<Bytes, serde_json::Error> {
        // A run in progress reads the clock; anything else is fixed by its events.
        let cacheable = run.state != RunState::InProgress;
        let version = (run.next_seq, links.session_link(run).expires);
        if cacheable {
            if let Some(bytes) = self.lookup(run.id, version) {
                return Ok(bytes);
            }
        }
        let bytes = render(run, links)?;
        if cacheable {
            self.insert(run.id, version, bytes.clone());
        }
        Ok(bytes)
    }

    /// A list answer (`ListRunsResponse`) of these runs: the same bytes serde_json writes for
    /// the struct, assembled from each run's JSON.
    pub fn page(
        &self,
        runs: &[Run],
        page_info: &PageInfo,
        links: &Links<'_>,
    ) -> Result<Vec<u8>, serde_json::Error> {
        let items = runs
            .iter()
            .map(|r| self.run(r, links))
            .collect::<Result<Vec<Bytes>, _>>()?;
        let len = items.iter().map(Bytes::len).sum::<usize>() + items.len() + 64;
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(b"{\"runs\":[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(item);
        }
        out.extend_from_slice(b"],\"page_info\":");
        serde_json::to_writer(&mut out, page_info)?;
        out.push(b'}');
        Ok(out)
    }

    fn lookup(&self, id: RunId, version: Version) -> Option<Bytes> {
        let inner = self.lock();
        match inner.items.get(&id) {
            Some((at, bytes)) if *at == version => Some(bytes.clone()),
            _ => None,
        }
    }

    /// Keeps `bytes` as the run's JSON at `version`, replacing an older rendering of the run. When
    /// the budget would be passed the cache forgets everything first: no bookkeeping per entry,
    /// and the runs clients keep reading are back in it after one round of reads.
    fn insert(&self, id: RunId, version: Version, bytes: Bytes) {
        // One huge run (a prompt of hundreds of kilobytes) would flush everything else.
        if bytes.len() > self.budget / 16 {
            return;
        }
        let mut inner = self.lock();
        let replaced = match inner.items.get(&id) {
            // Another thread rendered this run, or a later state of it.
            Some((at, _)) if *at >= version => return,
            Some((_, old)) => old.len(),
            None => 0,
        };
        inner.bytes -= replaced;
        if inner.bytes + bytes.len() > self.budget {
            inner.items.clear();
            inner.bytes = 0;
        }
        inner.bytes += bytes.len();
        inner.items.insert(id, (version, bytes));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The lock guards no invariant a panic could break halfway (a panic inside `insert`
        // leaves at worst a stale byte count), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.items.len(), inner.bytes)
    }
}

fn render(run: &Run, links: &Links<'_>) -> Result<Bytes, serde_json::Error> {
    let mut json = serde_json::to_vec(&RunItem::from(run, links))?;
    // The vector grew by doubling; what the cache holds should be what its budget counts.
    json.shrink_to_fit();
    Ok(Bytes::from(json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ListRunsResponse;
    use runledger_domain::{
        evolve, AgentConfig, Creator, CreatorKind, Event, RunCreated, SourceType, Timestamp,
    };

    const SECRET: [u8; 32] = [9; 32];

    fn links(now: u64) -> Links<'static> {
        Links {
            public_url: "http://127.0.0.1:8080",
            secret: &SECRET,
            now: Timestamp(now),
            ttl_secs: 7 * 24 * 3600,
        }
    }

    fn created(n: u128, prompt: &str) -> Run {
        let event = Event::Created(RunCreated {
            title: format!("run {n}"),
            prompt: prompt.to_string(),
            config: AgentConfig::default(),
            creator: Creator {
                kind: CreatorKind::User,
                uid: "key-1".into(),
                display_name: "CI \"nightly\"\n".into(),
            },
            source: SourceType::Api,
            metadata: [("k".to_string(), "v\u{1}".to_string())].into(),
        });
        evolve(None, RunId(n), &event, Timestamp(1_000 + n as u64)).expect("a run is created")
    }

    fn then(run: &Run, event: Event, at: u64) -> Run {
        evolve(Some(run.clone()), run.id, &event, Timestamp(at)).expect("the event applies")
    }

    #[test]
    fn a_page_is_byte_for_byte_what_serde_writes_for_the_struct() {
        let cache = RenderCache::new(DEFAULT_BUDGET);
        let queued = created(1, "plain");
        let running = then(
            &created(2, "tabs\tand \u{7f}é"),
            Event::Started { execution: 1 },
            2_000,
        );
        let done = then(&running, Event::Succeeded { execution: 1 }, 3_500);
        let runs = vec![queued, running, done];
        for page_info in [
            PageInfo {
                has_next_page: false,
                next_cursor: None,
            },
            PageInfo {
                has_next_page: true,
                next_cursor: Some("abc-_1".into()),
            },
        ] {
            // Twice: rendered, then from the cache.
            for _ in 0..2 {
                let expected = serde_json::to_vec(&ListRunsResponse {
                    runs: runs
                        .iter()
                        .map(|r| RunItem::from(r, &links(9_000)))
                        .collect(),
                    page_info: PageInfo {
                        has_next_page: page_info.has_next_page,
                        next_cursor: page_info.next_cursor.clone(),
                    },
                })
                .expect("serialises");
                let page = cache.page(&runs, &page_info, &links(9_000)).expect("json");
                assert_eq!(
                    String::from_utf8_lossy(&page),
                    String::from_utf8_lossy(&expected)
                );
            }
        }
        let empty = cache
            .page(
                &[],
                &PageInfo {
                    has_next_page: false,
                    next_cursor: None,
                },
                &links(0),
            )
            .expect("json");
        assert_eq!(empty, br#"{"runs":[],"page_info":{"has_next_page":false}}"#);
    }

    #[test]
    fn a_run_is_rendered_again_once_it_has_a_new_event() {
        let cache = RenderCache::new(DEFAULT_BUDGET);
        let queued = created(1, "p");
        let first = cache.run(&queued, &links(5_000)).expect("json");
        assert_eq!(cache.held().0, 1);
        let started = then(&queued, Event::Started { execution: 1 }, 2_000);
        let done = then(&started, Event::Succeeded { execution: 1 }, 3_000);
        let second = cache.run(&done, &links(5_000)).expect("json");
        assert_ne!(first, second);
        assert_eq!(second, render(&done, &links(5_000)).expect("json"));
        // The new rendering replaced the old one rather than joining it.
        assert_eq!(cache.held(), (1, second.len()));
        // An older state of the run (a reader holding a stale row) does not displace it.
        assert_eq!(cache.run(&queued, &links(5_000)).expect("json"), first);
        assert_eq!(
            cache.run(&done, &links(5_000)).expect("json").as_ptr(),
            second.as_ptr()
        );
    }

    #[test]
    fn a_run_in_progress_counts_its_time_up_to_each_answer() {
        let cache = RenderCache::new(DEFAULT_BUDGET);
        let running = then(&created(1, "p"), Event::Started { execution: 1 }, 2_000);
        let early = cache.run(&running, &links(3_000)).expect("json");
        let later = cache.run(&running, &links(4_500)).expect("json");
        assert!(String::from_utf8_lossy(&early).contains("\"run_time\":\"PT1S\""));
        assert!(String::from_utf8_lossy(&later).contains("\"run_time\":\"PT2.500S\""));
        assert_eq!(cache.held(), (0, 0));
    }

    #[test]
    fn the_cache_stays_within_its_budget() {
        let one = render(&created(0, "p"), &links(0)).expect("json").len();
        let budget = one * 40;
        let cache = RenderCache::new(budget);
        for n in 0..1_000 {
            let run = created(n, "p");
            assert_eq!(
                cache.run(&run, &links(0)).expect("json"),
                render(&run, &links(0)).expect("json")
            );
            let (_, bytes) = cache.held();
            assert!(bytes <= budget, "{bytes} > {budget}");
        }
        assert!(cache.held().0 > 0);
        // A run larger than a sixteenth of the budget is answered but not kept.
        let cache = RenderCache::new(budget);
        let huge = created(1, &"x".repeat(budget / 8));
        assert_eq!(
            cache.run(&huge, &links(0)).expect("json"),
            render(&huge, &links(0)).expect("json")
        );
        assert_eq!(cache.held(), (0, 0));
    }

    /// A run a schedule made carries `schedule` (OpenAPI `ScheduleInfo`: exactly its three
    /// fields, the due time stays in the log) and the source `SCHEDULED_AGENT`; any other run,
    /// one admitted with that source but no schedule included, has no `schedule` key at all.
    #[test]
    fn a_scheduled_run_renders_its_schedule_info() {
        use runledger_domain::RunSchedule;
        let schedule_id = RunId::new(Timestamp(1_763_700_000_000), 9);
        let mut admitted = runledger_domain::RunAdmitted::from_legacy(RunCreated {
            title: "nightly".into(),
            prompt: "p".into(),
            config: AgentConfig::default(),
            creator: Creator {
                kind: CreatorKind::User,
                uid: "key-1".into(),
                display_name: "alice".into(),
            },
            source: SourceType::ScheduledAgent,
            metadata: Default::default(),
        });
        admitted.team = "infra".into();
        let sent = evolve(None, RunId(7), &Event::Admitted(admitted), Timestamp(1_000))
            .expect("a run is created");
        let scheduled = then(
            &sent,
            Event::Scheduled {
                schedule: RunSchedule {
                    schedule_id,
                    schedule_name: "Nightly \"deps\"".into(),
                    cron_schedule: "0 3 * * 1-5".into(),
                    due: Timestamp(900),
                },
            },
            1_000,
        );
        let json = |run: &Run| -> serde_json::Value {
            serde_json::from_slice(&render(run, &links(2_000)).expect("json")).expect("parses")
        };
        let item = json(&scheduled);
        assert_eq!(item["source"], "SCHEDULED_AGENT");
        assert_eq!(
            item["schedule"],
            serde_json::json!({
                "schedule_id": schedule_id.to_string(),
                "schedule_name": "Nightly \"deps\"",
                "cron_schedule": "0 3 * * 1-5",
            })
        );
        let item = json(&sent);
        assert_eq!(item["source"], "SCHEDULED_AGENT");
        assert!(item.get("schedule").is_none(), "{item}");
        assert!(json(&created(1, "p")).get("schedule").is_none());
    }
}
