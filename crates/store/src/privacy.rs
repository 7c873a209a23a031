//! The data directory's privacy: the umask of every process that opens a store, and the
//! tightening of a directory an earlier version left readable (`tighten`). It must not touch
//! the agents' own files, whose modes they need.

use std::path::{Path, PathBuf};

use crate::layout::SLED_DIR;
use crate::{watermark, Error};

/// Makes everything this process creates from now on private to its user (umask 0077). sled
/// creates its files with the process umask (0644 under the usual 022), and the store holds
/// the key hashes and the secret that signs session links: whoever can read it can read every
/// run. Called by every process that opens a store, before anything is created.
pub fn private_umask() {
    use nix::sys::stat::{umask, Mode};
    umask(Mode::from_bits_truncate(0o077));
}

/// The entries of a data directory that hold the service's own records, tightened by
/// `tighten`: the store, and the transcripts beside it. The rest (workspaces, agents' files,
/// repository mirrors) belongs to the agents, whose files keep the modes they need (an
/// executable script stays executable); the private data directory keeps other users out.
const PRIVATE_ENTRIES: [&str; 3] = [SLED_DIR, watermark::FILE_NAME, "transcripts"];

/// Takes group and other permissions off what a data directory made before `private_umask`
/// (or copied in by hand) left readable: the directory itself becomes `dir_mode`, the store and
/// the transcripts 0700 (directories) and 0600 (files). A directory found private (0700) is
/// not entered: nobody else reaches what is below it. Returns the paths it changed. Symbolic
/// links are left alone, never followed.
pub fn tighten(data_dir: &Path, dir_mode: u32) -> Result<Vec<PathBuf>, Error> {
    use std::os::unix::fs::PermissionsExt;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let mut changed = Vec::new();
    let set = |path: &Path, mode: u32, changed: &mut Vec<PathBuf>| -> Result<(), Error> {
        let current = std::fs::symlink_metadata(path).map_err(io(path))?;
        if current.permissions().mode() & 0o7777 != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(io(path))?;
            changed.push(path.to_path_buf());
        }
        Ok(())
    };
    if !data_dir.is_dir() {
        return Ok(changed);
    }
    set(data_dir, dir_mode, &mut changed)?;
    let mut stack: Vec<PathBuf> = PRIVATE_ENTRIES.iter().map(|e| data_dir.join(e)).collect();
    while let Some(path) = stack.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path)(e)),
        };
        if meta.is_dir() {
            // A directory that is private already keeps others from everything below it, and
            // is what every start after the first finds: its contents are not walked, which at
            // a million transcripts on a cold page cache would take seconds of every start.
            if meta.permissions().mode() & 0o7777 == 0o700 {
                continue;
            }
            set(&path, 0o700, &mut changed)?;
            for entry in std::fs::read_dir(&path).map_err(io(&path))? {
                stack.push(entry.map_err(io(&path))?.path());
            }
        } else if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            // Only what others can reach: the owner's own bits stay as they are.
            let mode = meta.permissions().mode() & 0o700;
            set(&path, mode, &mut changed)?;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, Store};

    #[test]
    fn tighten_takes_others_off_the_store_and_transcripts_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        drop(Store::open(&data, &Options::default()).expect("open"));
        let mode = |p: &Path| {
            std::fs::symlink_metadata(p)
                .expect("exists")
                .permissions()
                .mode()
                & 0o7777
        };
        let chmod = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
        };
        // A directory made before the umask was private, as the earlier versions left it.
        std::fs::create_dir_all(data.join("transcripts")).expect("mkdir");
        std::fs::create_dir_all(data.join("workspaces/r1")).expect("mkdir");
        std::fs::write(data.join("transcripts/r1.jsonl"), b"{}\n").expect("write");
        std::fs::write(data.join("workspaces/r1/run.sh"), b"true").expect("write");
        for p in [
            "",
            "sled",
            "sled/db",
            "sled/conf",
            "transcripts",
            "transcripts/r1.jsonl",
        ] {
            chmod(
                &data.join(p),
                if p.ends_with("db") || p.contains('.') || p.ends_with("conf") {
                    0o644
                } else {
                    0o755
                },
            );
        }
        chmod(&data.join("workspaces/r1/run.sh"), 0o755);
        std::os::unix::fs::symlink("/etc/passwd", data.join("transcripts/link")).expect("link");
        let changed = tighten(&data, 0o700).expect("tighten");
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join("sled")), 0o700);
        assert_eq!(mode(&data.join("sled/db")), 0o600);
        assert_eq!(mode(&data.join("sled/conf")), 0o600);
        assert_eq!(mode(&data.join("transcripts")), 0o700);
        assert_eq!(mode(&data.join("transcripts/r1.jsonl")), 0o600);
        assert!(changed.contains(&data.join("sled/db")), "{changed:?}");
        // An agent's script stays executable; a link is not followed.
        assert_eq!(mode(&data.join("workspaces/r1/run.sh")), 0o755);
        assert_eq!(mode(Path::new("/etc/passwd")) & 0o044, 0o044);
        // Nothing left to do the second time.
        assert!(tighten(&data, 0o700).expect("again").is_empty());
        // A private directory is not walked (a start must not stat every transcript): what is
        // below it is out of others' reach whatever its mode.
        std::fs::write(data.join("transcripts/r2.jsonl"), b"{}\n").expect("write");
        chmod(&data.join("transcripts/r2.jsonl"), 0o644);
        assert!(tighten(&data, 0o700).expect("private dir").is_empty());
        // What the umask makes is private already.
        let fresh = dir.path().join("fresh");
        drop(Store::open(&fresh, &Options::default()).expect("open"));
        assert_eq!(mode(&fresh) & 0o077, 0);
        assert_eq!(mode(&fresh.join("sled/db")) & 0o077, 0);
        assert!(Store::present_in(&fresh));
        assert!(!Store::present_in(&dir.path().join("nothing")));
    }
}
