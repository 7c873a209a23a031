//! The web console's sessions against the real binary: signing in exchanges a key for a
//! strict cookie, the cookie authenticates the public API (unsafe methods only with the
//! session's CSRF token and from the console's origin), a revoked key's sessions and a signed-out
//! session end at once, a restart signs everyone out, pages escape what clients wrote and show
//! a key only its team's runs, every page carries the strict security headers, and the run page's
//! timeline pages through every event.

mod pages;
mod sessions;
mod support;
mod timeline;
