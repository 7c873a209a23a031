//! The admin audit log from outside: every administrative act recorded with its actor context
//! (`acts`: through the HTTP API, the reading endpoint's filters and paging, the refusal of
//! non-admin keys, `runledger audit --admin`, the server's start and stop), the offline
//! commands' acts and the log's export and import with its hash chain verified (`offline`),
//! and the golden bytes of its records (`golden`).

mod acts;
mod golden;
mod offline;
