//! Console sessions: the in-memory table that maps a session cookie to the API key that signed
//! in and to the session's CSRF token. Only a SHA-256 of each cookie value is kept, so a leak
//! of the table (a core dump, a debugger) hands out no usable cookie. The table is bounded,
//! and a session ends after an idle time and an absolute lifetime; it does not say whether the
//! key is still live — the caller re-checks the key on every request.
//!
//! Nothing is persisted: a restart signs every console user out (docs/decisions/0026-console.md).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use rand::RngCore as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;

/// A session ends this long after its last request.
pub const IDLE: Duration = Duration::from_secs(8 * 3600);
/// A session ends this long after sign-in, however busy.
pub const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// Sessions kept at most; signing in beyond it ends the least recently used one.
pub const MAX_SESSIONS: usize = 10_000;

/// A random 256-bit value as unpadded base64url (43 characters): a cookie value or a token.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn digest(cookie: &str) -> [u8; 32] {
    Sha256::digest(cookie.as_bytes()).into()
}

/// What a live session knows: who signed in, and the token its unsafe requests must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub key_id: String,
    pub csrf: String,
}

impl Session {
    /// Whether `given` is this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, given: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(given.as_bytes()))
    }
}

struct Entry {
    session: Session,
    signed_in: Instant,
    last_seen: Instant,
}

/// The session table, shared by every worker.
pub struct Sessions {
    table: Mutex<HashMap<[u8; 32], Entry>>,
    idle: Duration,
    lifetime: Duration,
    max: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(IDLE, LIFETIME, MAX_SESSIONS)
    }
}

impl Sessions {
    pub fn new(idle: Duration, lifetime: Duration, max: usize) -> Sessions {
        Sessions {
            table: Mutex::new(HashMap::new()),
            idle,
            lifetime,
            max: max.max(1),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Entry>> {
        // A panic while holding the lock leaves the map consistent (every change is one call).
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expired(&self, entry: &Entry, now: Instant) -> bool {
        now.duration_since(entry.last_seen) >= self.idle
            || now.duration_since(entry.signed_in) >= self.lifetime
    }

    /// Opens a session for `key_id`; returns the cookie value (given to the browser only) and
    /// the session.
    pub fn open(&self, key_id: &str) -> (String, Session) {
        self.open_at(key_id, Instant::now())
    }

    fn open_at(&self, key_id: &str, now: Instant) -> (String, Session) {
        let cookie = random_token();
        let session = Session {
            key_id: key_id.to_string(),
            csrf: random_token(),
        };
        let mut table = self.table();
        if table.len() >= self.max {
            table.retain(|_, e| !self.expired(e, now));
        }
        if table.len() >= self.max {
            // Still full of live sessions: the one unused longest goes.
            if let Some(oldest) = table
                .iter()
                .min_by_key(|(_, e)| e.last_seen)
                .map(|(k, _)| *k)
            {
                table.remove(&oldest);
            }
        }
        table.insert(
            digest(&cookie),
            Entry {
                session: session.clone(),
                signed_in: now,
                last_seen: now,
            },
        );
        (cookie, session)
    }

    /// The live session of `cookie`, marked as used now; an expired one is removed.
    pub fn find(&self, cookie: &str) -> Option<Session> {
        self.find_at(cookie, Instant::now())
    }

    fn find_at(&self, cookie: &str, now: Instant) -> Option<Session> {
        let key = digest(cookie);
        let mut table = self.table();
        let entry = table.get_mut(&key)?;
        if self.expired(entry, now) {
            table.remove(&key);
            return None;
        }
        entry.last_seen = now;
        Some(entry.session.clone())
    }

    /// Ends the session of `cookie` (sign-out); a no-op for an unknown cookie.
    pub fn close(&self, cookie: &str) {
        self.table().remove(&digest(cookie));
    }

    /// Ends every session of `key_id` (its key was revoked or is gone).
    pub fn close_key(&self, key_id: &str) {
        self.table().retain(|_, e| e.session.key_id != key_id);
    }

    /// Sessions held now, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_finds_its_session_and_nothing_else_does() {
        let sessions = Sessions::default();
        let (cookie, session) = sessions.open("k1");
        assert_eq!(cookie.len(), 43);
        assert_eq!(session.csrf.len(), 43);
        assert_ne!(cookie, session.csrf);
        assert_eq!(sessions.find(&cookie), Some(session.clone()));
        assert!(session.csrf_matches(&session.csrf));
        assert!(!session.csrf_matches(""));
        assert!(!session.csrf_matches(&cookie));
        assert_eq!(sessions.find(&format!("{cookie}x")), None);
        assert_eq!(sessions.find(""), None);
        // The table holds digests, not cookies.
        let table = sessions.table();
        assert!(table.keys().all(|k| k != &digest("")));
        assert!(table.contains_key(&digest(&cookie)));
    }

    #[test]
    fn idle_and_absolute_expiry_end_a_session() {
        let sessions = Sessions::new(Duration::from_secs(10), Duration::from_secs(25), 100);
        let t0 = Instant::now();
        let (cookie, _) = sessions.open_at("k", t0);
        // Used every 9 s it stays alive until its lifetime is over.
        for s in [9, 18] {
            assert!(sessions
                .find_at(&cookie, t0 + Duration::from_secs(s))
                .is_some());
        }
        assert!(sessions
            .find_at(&cookie, t0 + Duration::from_secs(25))
            .is_none());
        assert!(sessions.is_empty(), "an expired session is removed");

        let (idle, _) = sessions.open_at("k", t0);
        assert!(sessions
            .find_at(&idle, t0 + Duration::from_secs(10))
            .is_none());
    }

    #[test]
    fn sign_out_and_revocation_end_sessions() {
        let sessions = Sessions::default();
        let (a, _) = sessions.open("k1");
        let (b, _) = sessions.open("k1");
        let (c, _) = sessions.open("k2");
        sessions.close(&a);
        assert!(sessions.find(&a).is_none());
        assert!(sessions.find(&b).is_some());
        sessions.close_key("k1");
        assert!(sessions.find(&b).is_none());
        assert!(sessions.find(&c).is_some());
    }

    #[test]
    fn the_table_is_bounded_and_drops_the_least_recently_used() {
        let sessions = Sessions::new(IDLE, LIFETIME, 3);
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let (first, _) = sessions.open_at("k", at(0));
        let (second, _) = sessions.open_at("k", at(1));
        let (third, _) = sessions.open_at("k", at(2));
        assert!(sessions.find_at(&first, at(3)).is_some());
        let (fourth, _) = sessions.open_at("k", at(4));
        assert_eq!(sessions.len(), 3);
        assert!(sessions.find_at(&second, at(5)).is_none());
        for live in [&first, &third, &fourth] {
            assert!(sessions.find_at(live, at(5)).is_some());
        }
        // At a realistic size the bound holds too.
        let big = Sessions::new(IDLE, LIFETIME, 10_000);
        for _ in 0..10_050 {
            big.open("k");
        }
        assert_eq!(big.len(), 10_000);
    }
}
