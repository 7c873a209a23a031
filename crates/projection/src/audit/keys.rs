//! Pure: the audit index's layout and entries. Every run event has one entry in each of three
//! trees, each under a prefix that names a range of the tree:
//!
//! - `audit_team`: `team` — the events of one team;
//! - `audit_type`: `team ‖ type` — one team's events of one type (as `GET …/events` names
//!   it: `Created` for `Admitted` too, `Started` for `StartedOn`);
//! - `audit_actor`: `team ‖ actor` — one team's events by one key.
//!
//! An entry is the event's position `at ‖ run_id ‖ seq` (big-endian, so byte order is time
//! order, and a newest-first walk is a reverse walk) followed by its summary (type, team,
//! actor): a query checks the other filters, and that a hash did not collide, without reading
//! the log. A range's entries are stored in blocks (`blocks.rs`, as the read index's ranges
//! are): one sled value holds many consecutive entries, so the events of a projector batch
//! that land at the tail of a range cost one write of its last block, not one insert each.
//!
//! `team`, `type` and `actor` are 8-byte SHA-256 stand-ins (`keys::team_hash`, `field_hash`),
//! so every prefix has a fixed width. Scoping every tree by team keeps one team's query off
//! every other team's entries; a query over all teams (an admin key's) merges the teams'
//! ranges. It must not read or write sled.

use runledger_domain::{Event, RunId, Timestamp};
use runledger_store::Envelope;

use crate::keys::{team_hash, TeamHash, TEAM_LEN};

/// The bytes of an event's position: `at` (8) ‖ run id (16) ‖ seq (8).
pub const POS_LEN: usize = 32;

/// An event's place in the audit index; ordered as time, then run, then sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub at: Timestamp,
    pub run_id: RunId,
    pub seq: u64,
}

impl Position {
    pub fn of(envelope: &Envelope) -> Position {
        Position {
            at: envelope.at,
            run_id: envelope.run_id,
            seq: envelope.seq,
        }
    }

    /// The first position at `at`: everything at or after it sorts after (or equal).
    pub fn first_at(at: Timestamp) -> Position {
        Position {
            at,
            run_id: RunId(0),
            seq: 0,
        }
    }

    pub fn to_bytes(self) -> [u8; POS_LEN] {
        let mut out = [0u8; POS_LEN];
        out[..8].copy_from_slice(&self.at.0.to_be_bytes());
        out[8..24].copy_from_slice(&self.run_id.to_bytes());
        out[24..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// The position a key ends with (`None` if the key is too short).
    pub fn from_key_end(key: &[u8]) -> Option<Position> {
        let tail = key.get(key.len().checked_sub(POS_LEN)?..)?;
        let at = u64::from_be_bytes(tail[..8].try_into().ok()?);
        let run_id = RunId::from_bytes(tail[8..24].try_into().ok()?);
        let seq = u64::from_be_bytes(tail[24..].try_into().ok()?);
        Some(Position {
            at: Timestamp(at),
            run_id,
            seq,
        })
    }

    /// As a cursor's text: 64 hex digits.
    pub fn encode(self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A cursor's text back into a position; `None` unless it is 64 hex digits.
    pub fn decode(text: &str) -> Option<Position> {
        if text.len() != POS_LEN * 2 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; POS_LEN];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Position::from_key_end(&bytes)
    }
}

/// Which of the three trees a prefix belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    Team,
    Type,
    Actor,
}

/// Tags that keep the type and actor stand-ins apart from each other and from the run index's.
const TYPE_TAG: u8 = 0xA1;
const ACTOR_TAG: u8 = 0xA2;

/// The 8-byte stand-in of an event type or an actor in keys.
pub fn field_hash(tree: Tree, value: &str) -> [u8; 8] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update([match tree {
        Tree::Type => TYPE_TAG,
        Tree::Actor | Tree::Team => ACTOR_TAG,
    }]);
    h.update(value.as_bytes());
    let digest = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// The prefix of a team's range in `tree`; `value` is the type or actor (ignored for `Team`).
pub fn prefix(tree: Tree, team: &TeamHash, value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(TEAM_LEN + 8 + POS_LEN);
    out.extend_from_slice(team);
    if tree != Tree::Team {
        out.extend_from_slice(&field_hash(tree, value));
    }
    out
}

/// The key of a position under a prefix.
#[cfg(test)]
pub fn key(prefix: &[u8], position: Position) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + POS_LEN);
    out.extend_from_slice(prefix);
    out.extend_from_slice(&position.to_bytes());
    out
}

/// What the audit index keeps of an event besides its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The event's type as the events API names it.
    pub kind: String,
    pub team: String,
    /// The key that caused the event, if one did.
    pub actor: Option<String>,
}

impl Summary {
    /// `kind_len ‖ kind ‖ team_len ‖ team ‖ actor` (the rest; absent when empty).
    pub fn encode(&self) -> Vec<u8> {
        let kind = &self.kind.as_bytes()[..self.kind.len().min(255)];
        let team = &self.team.as_bytes()[..self.team.len().min(255)];
        let actor = self.actor.as_deref().unwrap_or("").as_bytes();
        let mut out = Vec::with_capacity(2 + kind.len() + team.len() + actor.len());
        out.push(kind.len() as u8);
        out.extend_from_slice(kind);
        out.push(team.len() as u8);
        out.extend_from_slice(team);
        out.extend_from_slice(actor);
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Summary> {
        let (&kind_len, rest) = bytes.split_first()?;
        let (kind, rest) = rest.split_at_checked(usize::from(kind_len))?;
        let (&team_len, rest) = rest.split_first()?;
        let (team, actor) = rest.split_at_checked(usize::from(team_len))?;
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
        Some(Summary {
            kind: text(kind)?,
            team: text(team)?,
            actor: if actor.is_empty() {
                None
            } else {
                Some(text(actor)?)
            },
        })
    }
}

/// The key that caused an event, as far as the event itself says: the creator of a run, the
/// key that sent a follow-up, cancelled or revoked the session link. Events the service makes
/// itself (start, end, usage, …) name none.
pub fn actor_named_in(event: &Event) -> Option<&str> {
    match event {
        Event::Created(created) => Some(&created.creator.uid),
        Event::Admitted(admitted) => Some(&admitted.created.creator.uid),
        Event::FollowupReceived { by, .. }
        | Event::Cancelled { by }
        | Event::SessionLinkRevoked { by } => Some(by),
        _ => None,
    }
}

/// The key an envelope's event is attributed to: the key its origin names (the key whose
/// request caused it), else, for an event recorded before origins were, the key the event
/// itself names.
pub fn actor_of(envelope: &Envelope) -> Option<&str> {
    match envelope.origin.as_ref() {
        Some(origin) => origin.key.as_ref().map(|key| key.id.as_str()),
        None => actor_named_in(&envelope.event),
    }
    .filter(|a| !a.is_empty())
}

/// The summary of an event of a run of `team`.
pub fn summary(team: &str, envelope: &Envelope) -> Summary {
    Summary {
        kind: envelope.event.kind().to_string(),
        team: team.to_string(),
        actor: actor_of(envelope).map(str::to_string),
    }
}

/// An entry as a block stores it: the position, then the summary.
pub fn entry(position: Position, summary: &Summary) -> Vec<u8> {
    let mut out = position.to_bytes().to_vec();
    out.extend_from_slice(&summary.encode());
    out
}

/// An entry back into its position and summary; `None` if it does not decode.
pub fn split_entry(entry: &[u8]) -> Option<(Position, Summary)> {
    let (position, summary) = entry.split_at_checked(POS_LEN)?;
    Some((Position::from_key_end(position)?, Summary::decode(summary)?))
}

/// The prefixes last asked for in each tree: the events of a batch mostly share their team,
/// type and actor, and each prefix costs a SHA-256 or two.
#[derive(Default)]
pub struct Prefixes {
    last: [Option<(String, String, Vec<u8>)>; 3],
}

impl Prefixes {
    /// `prefix(tree, team_hash(team), value)`, computed once for a run of equal arguments.
    pub fn of(&mut self, tree: Tree, team: &str, value: &str) -> Vec<u8> {
        let slot = &mut self.last[tree as usize];
        if let Some((t, v, p)) = slot {
            if t == team && v == value {
                return p.clone();
            }
        }
        let p = prefix(tree, &team_hash(team), value);
        *slot = Some((team.to_string(), value.to_string(), p.clone()));
        p
    }
}

/// The entries of one event: (tree, range prefix, entry). No actor, no `audit_actor` entry.
#[cfg(test)]
pub fn entries(team: &str, envelope: &Envelope) -> Vec<(Tree, Vec<u8>, Vec<u8>)> {
    entries_with(team, envelope, &mut Prefixes::default())
}

/// `entries`, with the prefixes of earlier events at hand.
pub fn entries_with(
    team: &str,
    envelope: &Envelope,
    prefixes: &mut Prefixes,
) -> Vec<(Tree, Vec<u8>, Vec<u8>)> {
    let summary = summary(team, envelope);
    let entry = entry(Position::of(envelope), &summary);
    let mut out = Vec::with_capacity(3);
    out.push((Tree::Team, prefixes.of(Tree::Team, team, ""), entry.clone()));
    out.push((
        Tree::Type,
        prefixes.of(Tree::Type, team, &summary.kind),
        entry.clone(),
    ));
    if let Some(actor) = &summary.actor {
        out.push((Tree::Actor, prefixes.of(Tree::Actor, team, actor), entry));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_round_trips_and_sorts_as_time_then_run_then_seq() {
        let a = Position {
            at: Timestamp(5),
            run_id: RunId(9),
            seq: 3,
        };
        assert_eq!(Position::decode(&a.encode()), Some(a));
        assert_eq!(Position::from_key_end(&key(b"prefix..", a)), Some(a));
        let later = Position {
            at: Timestamp(6),
            run_id: RunId(1),
            seq: 0,
        };
        assert!(a.to_bytes() < later.to_bytes() && a < later);
        for bad in ["", "zz", &"g".repeat(64), &"0".repeat(63)] {
            assert_eq!(Position::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_summary_round_trips() {
        for actor in [None, Some("key-1".to_string())] {
            let s = Summary {
                kind: "Cancelled".into(),
                team: "team-a".into(),
                actor,
            };
            assert_eq!(Summary::decode(&s.encode()), Some(s));
        }
        assert_eq!(Summary::decode(&[9, 1]), None);
        let position = Position {
            at: Timestamp(5),
            run_id: RunId(9),
            seq: 3,
        };
        let s = Summary {
            kind: "Created".into(),
            team: "t".into(),
            actor: None,
        };
        assert_eq!(split_entry(&entry(position, &s)), Some((position, s)));
        assert_eq!(split_entry(&position.to_bytes()), None);
    }

    #[test]
    fn an_event_without_an_actor_has_no_actor_entry() {
        let envelope = Envelope {
            run_id: RunId(1),
            seq: 1,
            at: Timestamp(2),
            event: Event::Started { execution: 1 },
            origin: None,
        };
        let trees: Vec<Tree> = entries("a", &envelope).iter().map(|e| e.0).collect();
        assert_eq!(trees, vec![Tree::Team, Tree::Type]);
        let cancel = Envelope {
            event: Event::Cancelled { by: "k".into() },
            ..envelope
        };
        assert_eq!(entries("a", &cancel).len(), 3);
        // An origin names the actor, whatever the event names; a service's own has none.
        let mut by_origin = cancel.clone();
        by_origin.origin = Some(runledger_domain::Origin {
            key: Some(runledger_domain::OriginKey {
                id: "key-9".into(),
                name: "ci".into(),
                kind: "agent".into(),
                team: "a".into(),
                admin: false,
            }),
            ..runledger_domain::Origin::system("test")
        });
        assert_eq!(actor_of(&by_origin), Some("key-9"));
        by_origin.origin = Some(runledger_domain::Origin::system("test"));
        assert_eq!(actor_of(&by_origin), None);
    }
}
