//! Integration tests: the real binary, real HTTP, a real data directory.

mod keys;
mod lifecycle;
mod listeners;
mod openapi;
mod problems;
mod restart;
mod support;
