//! A store written before the audit index (layout 11) gets one when the server starts: its
//! events are queryable at once.

use std::collections::BTreeMap;

use super::{audit, summary, TestKey};
use crate::common::{Server, CONFIG};
use runledger::domain::{
    AgentConfig, Creator, CreatorKind, Event, RunAdmitted, RunCreated, RunId, SourceType, Timestamp,
};
use runledger::store::{self, Store};

#[tokio::test]
async fn a_store_of_layout_11_gets_its_audit_index_at_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let at = Timestamp(1_700_000_000_000);
    let id = RunId::new(at, 7);
    {
        let store =
            Store::open(&tmp.path().join("data"), &store::Options::default()).expect("open store");
        let admitted = Event::Admitted(RunAdmitted {
            created: RunCreated {
                title: "old".into(),
                prompt: "old".into(),
                config: AgentConfig::default(),
                creator: Creator {
                    kind: CreatorKind::User,
                    uid: "old-key".into(),
                    display_name: "old".into(),
                },
                source: SourceType::Api,
                metadata: BTreeMap::new(),
            },
            team: "default".into(),
            sealed: None,
        });
        let cancelled = Event::Cancelled {
            by: "old-key".into(),
        };
        store
            .append(&store::envelopes(
                id,
                0,
                at,
                vec![admitted, cancelled],
                None,
            ))
            .expect("append");
        store
            .db()
            .insert("projection_layout", &11u32.to_be_bytes())
            .expect("marker");
        store.db().flush().expect("flush");
    }
    let s = Server::start_in(tmp.path(), CONFIG);
    s.wait_ready().await;
    let admin = TestKey {
        secret: s.key.clone(),
        id: String::new(),
    };
    let (status, v) = audit(&s, &admin, "actor=old-key").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        summary(&v),
        vec![
            (id.to_string(), "Cancelled".to_string()),
            (id.to_string(), "Created".to_string()),
        ]
    );
}
