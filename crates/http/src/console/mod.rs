//! The web console: HTML pages served by the binary at `/` (runs, one run, new run, keys,
//! sign-in), their embedded stylesheet and script, and the console sessions that let the
//! page's script call the public API with a cookie instead of a bearer key.
//!
//! It owns the session cookie, the CSRF rules of cookie-authenticated requests and the pages'
//! markup. It reads runs as the API does — through the `RunHandle`, scoped to the signed-in
//! key's team — and never writes anything itself: every change (a new run, a follow-up, a
//! cancel, a key) is a call of the public API by the page's script, so a session can do exactly
//! what its key can (docs/console.md, docs/decisions/0026-console.md).

mod assets;
mod guard;
mod pages;
mod respond;
mod routes;

pub use crate::sessions::{Session, Sessions};
pub use guard::{authenticate, cookie_name, COOKIE, CSRF_HEADER, TLS_COOKIE};
pub use respond::CSP;
pub use routes::configure;
