//! The shell's clock: wall time in milliseconds as the domain's `Timestamp`. A leaf module, so
//! every layer that needs the time (actors, execution, configuration, HTTP) reads it here
//! instead of from one another; the domain itself takes time only as a value.

use std::time::{SystemTime, UNIX_EPOCH};

use runledger_domain::Timestamp;

/// Now, in milliseconds since the Unix epoch (0 for a clock set before it).
pub fn now() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}
