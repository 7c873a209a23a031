//! The login profile: the server, API key and CA certificate `runledger login` saved, in
//! `$XDG_CONFIG_HOME/runledger/profile.toml` (else `~/.config/runledger/profile.toml`), and how
//! a command picks its server and key: a flag wins over its environment variable (clap applies
//! both), which wins over the profile, field by field. The file holds a secret: it is written
//! with mode 0600 to a temporary file in the same directory and renamed over the old one, so
//! that a reader never sees half a profile and the key is never readable by others, even for a
//! moment.

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::remote::{Error, Target};

#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
}

/// The profile's path. `XDG_CONFIG_HOME` counts only when absolute, as the XDG base directory
/// specification says.
pub fn path() -> Result<PathBuf, Error> {
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|home| home.join(".config"))
        })
        .ok_or_else(|| {
            Error::Config(
                "neither XDG_CONFIG_HOME nor HOME is set, so there is no place for the login \
                 profile; pass --server and --api-key"
                    .into(),
            )
        })?;
    Ok(config_home.join("runledger").join("profile.toml"))
}

/// The saved profile; `None` when there is none.
pub fn load() -> Result<Option<Profile>, Error> {
    let path = path()?;
    load_from(&path)
}

fn load_from(path: &Path) -> Result<Option<Profile>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::Config(format!(
                "cannot read the login profile {}: {e}",
                path.display()
            )))
        }
    };
    toml::from_str(&text).map(Some).map_err(|e| {
        Error::Config(format!(
            "the login profile {} is damaged ({}); run `runledger login` again",
            path.display(),
            e.message()
        ))
    })
}

/// Writes the profile atomically with mode 0600; returns where.
pub fn save(profile: &Profile) -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    let path = path()?;
    let dir = path
        .parent()
        .context("the profile's path has no directory")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let text = toml::to_string(profile).context("cannot encode the profile")?;
    // tempfile creates the file with mode 0600, exclusively.
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("cannot write {}", file.path().display()))?;
    file.persist(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Removes the profile; returns its path, or `None` when there was none.
pub fn remove() -> anyhow::Result<Option<PathBuf>> {
    let path = path()?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("cannot remove {}: {e}", path.display())),
    }
}

/// The server and key of a command: `given` (flags, else environment, as clap merged them),
/// else the profile's, field by field.
pub fn target(
    server: Option<&str>,
    api_key: Option<&str>,
    ca_cert: Option<&Path>,
) -> Result<Target, Error> {
    let saved = if server.is_some() && api_key.is_some() && ca_cert.is_some() {
        None
    } else {
        load()?
    };
    resolve(server, api_key, ca_cert, saved.unwrap_or_default())
}

fn resolve(
    server: Option<&str>,
    api_key: Option<&str>,
    ca_cert: Option<&Path>,
    saved: Profile,
) -> Result<Target, Error> {
    let nonempty = |s: &str| !s.trim().is_empty();
    let server = server
        .filter(|s| nonempty(s))
        .map(str::to_string)
        .or(saved.server.filter(|s| nonempty(s)))
        .ok_or_else(|| {
            Error::Config(
                "no server: pass --server URL, set RUNLEDGER_SERVER, or run `runledger login \
                 --server URL`"
                    .into(),
            )
        })?;
    let key = api_key
        .filter(|s| nonempty(s))
        .map(str::to_string)
        .or(saved.api_key.filter(|s| nonempty(s)))
        .ok_or_else(|| {
            Error::Config(
                "no API key: pass --api-key KEY, set RUNLEDGER_API_KEY, or run `runledger login`"
                    .into(),
            )
        })?;
    Ok(Target {
        server,
        key: key.trim().to_string(),
        ca_cert: ca_cert.map(Path::to_path_buf).or(saved.ca_cert),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved() -> Profile {
        Profile {
            server: Some("https://saved".into()),
            api_key: Some("rl_saved".into()),
            ca_cert: Some("/saved.pem".into()),
        }
    }

    #[test]
    fn given_values_win_over_the_profile_field_by_field() {
        let t = resolve(Some("https://given"), None, None, saved()).expect("target");
        assert_eq!(
            (t.server.as_str(), t.key.as_str()),
            ("https://given", "rl_saved")
        );
        assert_eq!(t.ca_cert, Some(PathBuf::from("/saved.pem")));
        let t = resolve(None, Some("rl_given"), Some(Path::new("/g.pem")), saved()).expect("t");
        assert_eq!(
            (t.server.as_str(), t.key.as_str()),
            ("https://saved", "rl_given")
        );
        assert_eq!(t.ca_cert, Some(PathBuf::from("/g.pem")));
    }

    #[test]
    fn a_missing_server_or_key_says_how_to_give_it() {
        let e = resolve(None, Some("k"), None, Profile::default()).expect_err("no server");
        assert!(e.to_string().contains("--server") && e.to_string().contains("RUNLEDGER_SERVER"));
        assert_eq!(e.exit_code(), super::super::remote::exit::CONFIG);
        // An empty value (an unset variable expanded in a script) counts as none.
        let e = resolve(Some("http://x"), Some(" "), None, Profile::default()).expect_err("key");
        assert!(e.to_string().contains("--api-key") && e.to_string().contains("login"));
    }

    #[test]
    fn a_damaged_profile_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("profile.toml");
        std::fs::write(&file, "server = [").expect("write");
        let e = load_from(&file).expect_err("damaged");
        assert!(e.to_string().contains("profile.toml is damaged"), "{e}");
        assert!(load_from(&dir.path().join("none.toml"))
            .expect("ok")
            .is_none());
    }
}
