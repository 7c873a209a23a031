//! `[secrets]`: each entry's value, read from its file or from the server's environment when
//! the configuration is loaded, held in a `SecretValue` whose `Debug` never shows it. Errors
//! name the source, never a value. Whether an environment or a webhook names a defined secret
//! is theirs to check.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::Error;
use crate::file::SecretSource;
use crate::names::variable_name;

/// A secret's value. Its `Debug` never shows the value, so neither can a log line or an error
/// that formats the configuration.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(pub(crate) String);

impl SecretValue {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(…)")
    }
}

/// One entry of `[secrets]`, read at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub value: SecretValue,
    /// The file it was read from, which the sandbox hides from agents.
    pub file: Option<PathBuf>,
}

/// Reads every secret's value now, so that a missing file or variable stops start-up instead of
/// failing runs later. Error messages name the source, never a value.
pub(crate) fn read_secrets(
    sources: BTreeMap<String, SecretSource>,
) -> Result<BTreeMap<String, Secret>, Error> {
    let mut secrets = BTreeMap::new();
    for (name, source) in sources {
        let at = format!("secrets.{name}");
        if !variable_name(&name) {
            return Err(Error::Invalid(format!(
                "{at}: {name:?} is not a variable name (letters, digits and '_', not starting \
                 with a digit, and not a reserved RUNLEDGER_ variable)"
            )));
        }
        let (value, file) = match source {
            SecretSource::File(path) => {
                let path = std::path::absolute(&path)
                    .map_err(|e| Error::Invalid(format!("{at}: {}: {e}", path.display())))?;
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    Error::Invalid(format!("{at}: cannot read {}: {e}", path.display()))
                })?;
                // `echo key > file` leaves a newline that is not part of the key.
                let value = text.strip_suffix('\n').unwrap_or(&text);
                let value = value.strip_suffix('\r').unwrap_or(value).to_string();
                (value, Some(path))
            }
            SecretSource::Env(var) => match std::env::var(&var) {
                Ok(value) => (value, None),
                Err(_) => {
                    return Err(Error::Invalid(format!(
                        "{at}: the server's environment variable {var} is not set (or not UTF-8)"
                    )))
                }
            },
        };
        if value.is_empty() {
            return Err(Error::Invalid(format!(
                "{at}: the value is empty; a secret must have one"
            )));
        }
        secrets.insert(
            name,
            Secret {
                value: SecretValue(value),
                file,
            },
        );
    }
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use crate::load::load_text;

    #[test]
    fn secrets_are_read_at_load_and_never_shown_by_debug() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("k");
        std::fs::write(&key, "value-123\n").expect("write");
        let config = load_text(&format!(
            "[secrets]\nK = {{ file = {:?} }}\n\n[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"a\"]\nsecrets = [\"K\"]\n",
            key.display().to_string()
        ))
        .expect("valid");
        let secret = &config.secrets["K"];
        assert_eq!(secret.value.expose(), "value-123");
        assert_eq!(secret.file.as_deref(), Some(key.as_path()));
        assert!(!format!("{config:?}").contains("value-123"));
        std::fs::write(&key, "").expect("write");
        let err = load_text(&format!(
            "[secrets]\nK = {{ file = {:?} }}\n",
            key.display().to_string()
        ))
        .expect_err("empty");
        assert!(
            err.to_string().contains("secrets.K: the value is empty"),
            "{err}"
        );
    }
}
