//! What can go wrong with a bundle: reading or writing it, a bundle that is not what runledger
//! writes (the sentence names the section, line or field), or a store that cannot be read.

/// What is wrong with a bundle, or with reading or writing one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The bundle is not what runledger writes; the sentence names what and where.
    #[error("{0}")]
    Damaged(String),
    /// The store could not be read (a damaged record, a missing content).
    #[error("{0}")]
    Store(String),
}
