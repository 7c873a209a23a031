//! Hash chains and seals with the real binary (issue #38, tamper evidence): a seal follows a
//! write within the interval and none comes while idle; `runledger verify` names the first
//! run and event that does not verify; a run's proof checks offline with the public key and a
//! forged one does not; an edited export is refused by `import` and `verify --export`; a store
//! written before chains is sealed from its state at the upgrade; each seal reaches
//! `server.seal_webhook`, signed.

mod exports;
mod proofs;
mod sealing;
mod support;
mod upgrade;
mod webhook;
