//! runledger: a hook for the body of the answers the HTTP/1 dispatcher makes by itself, to
//! requests it cannot hand to the service (a malformed or oversized request line or header, a
//! URI over `http::Uri`'s 65,534 bytes). Upstream sends them with an empty body; a server that
//! answers every failure in one format sets the hook once, at start.

use std::sync::OnceLock;

use bytes::Bytes;

use crate::{body::BoxBody, ResponseHead};

/// Given the head of such an answer (its status set), adds headers and returns the body.
pub type ErrorBody = fn(&mut ResponseHead) -> Bytes;

static HOOK: OnceLock<ErrorBody> = OnceLock::new();

/// Sets the hook for the whole process; a second call is ignored.
pub fn set_error_body(hook: ErrorBody) {
    let _ = HOOK.set(hook);
}

pub(crate) fn error_body(head: &mut ResponseHead) -> BoxBody {
    match HOOK.get() {
        Some(hook) => BoxBody::new(hook(head)),
        None => BoxBody::new(()),
    }
}
