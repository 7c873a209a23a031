//! The terminal client (`run`, `runs …`, `login`, `logout`) and `keys` against a running server,
//! through the real binary: outcomes as exit codes, the transcript followed live and resumed,
//! output for people and for programs, the login profile and the precedence of flags,
//! variables and profile, and the failures (a wrong command line, a refused key, a server that
//! is not runledger) each with its own code, one line and no backtrace.

mod codes;
mod following;
mod login;
mod support;
mod terminal;
