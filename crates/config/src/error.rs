//! The one error of loading the configuration: the file cannot be read, is not TOML of the
//! schema (`file.rs`), or holds a value a section does not accept. Every section returns it; it
//! knows no section and no file.

use std::path::PathBuf;

/// Why the configuration could not be loaded; `Config::load` adds the file and the line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}
