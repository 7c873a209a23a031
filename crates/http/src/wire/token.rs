//! Session links: the UUID-shaped session id of a run and the capability token of its session
//! page (an HMAC of the run id, its session epoch and the link's expiry), remembered per thread
//! because clients poll the same runs over and over; and the keyed-hash tokens of artifact
//! download links. What a token signs is decided here; who may use one is `http::session`'s.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use runledger_domain::{Run, RunId, Timestamp};
use runledger_format::time::{hex, Inline, HEX_DIGITS};

type HmacSha256 = Hmac<Sha256>;

/// A session id in UUID form, derived from the run id (one session per run).
pub fn session_id(id: RunId) -> Inline<36> {
    let mut out = Inline::new();
    for (i, b) in id.0.to_be_bytes().into_iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.push(HEX_DIGITS[usize::from(b >> 4)]);
        out.push(HEX_DIGITS[usize::from(b & 15)]);
    }
    out
}

/// The token of a capability URL: the first 16 bytes of SHA-256(secret ‖ purpose ‖ parts), in
/// lowercase hex. Session links and artifact download links both use it, each with its own
/// `purpose`, so a token of one kind is never valid as the other.
pub fn capability(secret: &[u8; 32], purpose: &[u8], parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    h.update(secret);
    h.update(purpose);
    for part in parts {
        h.update(part);
    }
    hex(&h.finalize()[..16])
}

/// Tokens remembered per thread by `session_token` before its memo is cleared.
const TOKEN_MEMO: usize = 4096;

/// The longest a session link's expiry is rounded up by: the links handed out within one step
/// are the same link, so a client polling a run sees one link, a finished run's JSON stays the
/// same bytes for a day (the render cache, `http::render`, and clients comparing answers), and
/// the memo below keeps working.
const MAX_EXPIRY_STEP_SECS: u64 = 24 * 3600;

/// What a session link's token signs: a run, the run's session epoch (moved by every revoke,
/// `Event::SessionLinkRevoked`) and the link's expiry in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionLink {
    pub run: RunId,
    pub epoch: u32,
    pub expires: u64,
}

impl SessionLink {
    /// The link to hand out for `run` at `now`: valid for at least `ttl_secs`, its expiry
    /// rounded up to a step of a 7th of the time to live (at most a day, at least a second).
    pub fn handed_out(run: &Run, now: Timestamp, ttl_secs: u64) -> SessionLink {
        SessionLink {
            run: run.id,
            epoch: run.session_epoch,
            expires: expiry(now, ttl_secs),
        }
    }

    /// Whether the link's time is up at `now`, or it reaches further than a link handed out
    /// at `now` would (the time to live was shortened since, and old links follow it).
    pub fn expired(&self, now: Timestamp, ttl_secs: u64) -> bool {
        now.0 / 1000 >= self.expires || self.expires > expiry(now, ttl_secs)
    }
}

/// The expiry, in Unix seconds, of a session link handed out at `now`.
pub fn expiry(now: Timestamp, ttl_secs: u64) -> u64 {
    let step = (ttl_secs / 7).clamp(1, MAX_EXPIRY_STEP_SECS);
    let earliest = (now.0 / 1000).saturating_add(ttl_secs);
    (earliest / step).saturating_add(1).saturating_mul(step)
}

/// `session_token`'s memo: the tokens of recently rendered links under one secret.
struct TokenMemo {
    secret: [u8; 32],
    tokens: runledger_base::memo::Memo<SessionLink, String>,
}

thread_local! {
    static TOKENS: std::cell::RefCell<TokenMemo> = std::cell::RefCell::new(TokenMemo {
        secret: [0; 32],
        tokens: runledger_base::memo::Memo::new(TOKEN_MEMO),
    });
}

/// HMAC-SHA256, under the instance's session secret, of `"session-link"`, the run id, the
/// session epoch and the expiry (fixed-width, so no two links sign the same bytes), in
/// lowercase hex. A token of another run, epoch or expiry, or under another secret, is a
/// different token; nothing but the secret makes one.
fn derive(secret: &[u8; 32], link: &SessionLink) -> String {
    // HMAC pads a key shorter than SHA-256's 64-byte block with zeros (RFC 2104), so this is
    // HMAC under the 32-byte secret itself, without a fallible constructor.
    let mut key = [0u8; 64];
    key[..32].copy_from_slice(secret);
    let mut mac = HmacSha256::new(&key.into());
    mac.update(b"session-link");
    mac.update(&link.run.to_bytes());
    mac.update(&link.epoch.to_be_bytes());
    mac.update(&link.expires.to_be_bytes());
    hex(&mac.finalize().into_bytes())
}

/// Whether `given` is the token of `link`, compared in constant time. Not remembered: what a
/// visitor sends is not what the server handed out, and must not crowd the memo.
pub fn session_token_matches(secret: &[u8; 32], link: &SessionLink, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(derive(secret, link).as_bytes().ct_eq(given.as_bytes()))
}

/// The capability token of a session link. Every started run in a list or a get carries one,
/// and HMAC-SHA256 is a visible share of a list's CPU on a CPU without SHA instructions.
/// Clients poll the same runs over and over, and a link stays the same for up to a day
/// (`MAX_EXPIRY_STEP_SECS`), so each thread trades the memory of the last few thousand tokens
/// it made for computing them again.
pub fn session_token(secret: &[u8; 32], link: &SessionLink) -> String {
    let compute = || derive(secret, link);
    TOKENS.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return compute();
        };
        if memo.secret != *secret {
            memo.secret = *secret;
            memo.tokens.clear();
        }
        memo.tokens.get_or_compute(link, compute)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(run: u128, epoch: u32, expires: u64) -> SessionLink {
        SessionLink {
            run: RunId(run),
            epoch,
            expires,
        }
    }

    /// The token is HMAC-SHA256(secret, "session-link" ‖ run id ‖ epoch ‖ expiry), checked
    /// against the `hmac` crate's own keyed constructor and against RFC 4231's first vector,
    /// so the zero-padded key is known to be HMAC under the secret.
    #[test]
    fn session_tokens_are_the_hmac_of_run_epoch_and_expiry() {
        let secret = [7u8; 32];
        let l = link(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef, 3, 1_800_000_000);
        let mut mac = HmacSha256::new_from_slice(&secret).expect("any key length");
        mac.update(b"session-link");
        mac.update(&l.run.to_bytes());
        mac.update(&3u32.to_be_bytes());
        mac.update(&1_800_000_000u64.to_be_bytes());
        assert_eq!(
            session_token(&secret, &l),
            hex(&mac.finalize().into_bytes())
        );
        assert_eq!(session_token(&secret, &l).len(), 64);
        // RFC 4231 test case 1, through the same padding as `derive`.
        let mut key = [0u8; 64];
        key[..20].copy_from_slice(&[0x0b; 20]);
        let mut mac = HmacSha256::new(&key.into());
        mac.update(b"Hi There");
        assert_eq!(
            hex(&mac.finalize().into_bytes()),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    /// Changing any signed part, or the secret, changes the token.
    #[test]
    fn every_signed_part_changes_the_token() {
        let secret = [7u8; 32];
        let base = session_token(&secret, &link(1, 0, 1000));
        for other in [link(2, 0, 1000), link(1, 1, 1000), link(1, 0, 1001)] {
            assert_ne!(session_token(&secret, &other), base, "{other:?}");
        }
        assert_ne!(session_token(&[8u8; 32], &link(1, 0, 1000)), base);
    }

    /// The memo answers per secret: two servers in one process never share tokens, and more
    /// links than the memo holds still get theirs.
    #[test]
    fn remembered_session_tokens_are_those_of_their_secret() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        for round in 0..2 {
            for i in 0..(TOKEN_MEMO as u128 + 10) {
                let l = link(i * 1_000_003 + round, 0, 5000);
                assert_eq!(session_token(&a, &l), derive(&a, &l));
                assert_eq!(session_token(&a, &l), derive(&a, &l));
            }
        }
        let l = link(7, 0, 5000);
        assert_eq!(session_token(&b, &l), derive(&b, &l));
        assert_eq!(session_token(&a, &l), derive(&a, &l));
    }

    /// A link lives at least its time to live, at most a step (a 7th of it, a day at most)
    /// longer; the links handed out within one step are the same link.
    #[test]
    fn expiries_are_rounded_up_to_a_step() {
        let week = 7 * 24 * 3600;
        let now = Timestamp(1_800_000_000_000);
        let e = expiry(now, week);
        assert!(
            e > 1_800_000_000 + week && e <= 1_800_000_000 + week + 86_400,
            "{e}"
        );
        assert_eq!(e % 86_400, 0);
        assert_eq!(expiry(now, 70), 1_800_000_080);
        assert_eq!(expiry(Timestamp(now.0 + 1000), week), e);
        // A tiny time to live steps by the second.
        assert_eq!(expiry(now, 2), 1_800_000_003);
        let mut run = runledger_domain::sample_run(1);
        run.session_epoch = 4;
        let l = SessionLink::handed_out(&run, now, 2);
        assert_eq!((l.epoch, l.expires), (4, 1_800_000_003));
        assert!(!l.expired(now, 2));
        assert!(l.expired(Timestamp(1_800_000_003_000), 2));
        // Shortening the time to live shortens the links handed out before.
        let long = SessionLink::handed_out(&run, now, week);
        assert!(!long.expired(now, week));
        assert!(long.expired(now, 60));
    }

    #[test]
    fn session_ids_are_uuid_shaped() {
        let s = session_id(RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef));
        assert_eq!(&*s, "01234567-89ab-cdef-0123-456789abcdef");
        let s = session_id(RunId(u128::MAX));
        assert_eq!(&*s, "ffffffff-ffff-ffff-ffff-ffffffffffff");
    }
}
