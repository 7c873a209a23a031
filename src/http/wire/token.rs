//! Session links: the UUID-shaped session id of a run and the capability token of its session
//! page (a keyed SHA-256 of the run id), remembered per thread because clients poll the same
//! runs over and over.

use sha2::{Digest, Sha256};

use crate::domain::RunId;
use crate::format::time::{hex, Inline, HEX_DIGITS};

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

/// `session_token`'s memo: the tokens of recently rendered runs under one secret.
struct TokenMemo {
    secret: [u8; 32],
    tokens: crate::memo::Memo<RunId, String>,
}

thread_local! {
    static TOKENS: std::cell::RefCell<TokenMemo> = std::cell::RefCell::new(TokenMemo {
        secret: [0; 32],
        tokens: crate::memo::Memo::new(TOKEN_MEMO),
    });
}

/// The capability token of a run's session page. Every started run in a list or a get carries
/// one, and SHA-256 is a visible share of a list's CPU on a CPU without SHA instructions.
/// Clients poll the same runs over and over, so each thread trades the memory of the tokens of
/// the last few thousand runs it rendered for hashing them again.
pub fn session_token(secret: &[u8; 32], id: RunId) -> String {
    let compute = || capability(secret, b"session-link", &[&id.to_bytes()]);
    TOKENS.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return compute();
        };
        if memo.secret != *secret {
            memo.secret = *secret;
            memo.tokens.clear();
        }
        memo.tokens.get_or_compute(&id, compute)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Session links handed out earlier must keep working: the token is the first 16 bytes of
    /// SHA-256(secret ‖ "session-link" ‖ run id), in lowercase hex.
    #[test]
    fn session_tokens_keep_their_derivation() {
        let secret = [7u8; 32];
        let id = RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let digest = Sha256::new()
            .chain_update(secret)
            .chain_update(b"session-link")
            .chain_update(id.to_bytes())
            .finalize();
        let expected: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(session_token(&secret, id), expected);
        assert_eq!(session_token(&secret, id).len(), 32);
    }

    /// The memo answers per secret: two servers in one process never share tokens, and more
    /// runs than the memo holds still get theirs.
    #[test]
    fn remembered_session_tokens_are_those_of_their_secret() {
        let derive = |secret: &[u8; 32], id: RunId| {
            let digest = Sha256::new()
                .chain_update(secret)
                .chain_update(b"session-link")
                .chain_update(id.to_bytes())
                .finalize();
            hex(&digest[..16])
        };
        let (a, b) = ([1u8; 32], [2u8; 32]);
        for round in 0..2 {
            for i in 0..(TOKEN_MEMO as u128 + 10) {
                let id = RunId(i * 1_000_003 + round);
                assert_eq!(session_token(&a, id), derive(&a, id));
                assert_eq!(session_token(&a, id), derive(&a, id));
            }
        }
        let id = RunId(7);
        assert_eq!(session_token(&b, id), derive(&b, id));
        assert_eq!(session_token(&a, id), derive(&a, id));
    }

    #[test]
    fn session_ids_are_uuid_shaped() {
        let s = session_id(RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef));
        assert_eq!(&*s, "01234567-89ab-cdef-0123-456789abcdef");
        let s = session_id(RunId(u128::MAX));
        assert_eq!(&*s, "ffffffff-ffff-ffff-ffff-ffffffffffff");
    }
}
