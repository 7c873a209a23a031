//! Pure: git's `diff --raw --numstat -z` output into the files of a `RepositoryChanges`, and a
//! diff cut to a byte cap at the start of a file's section, so a cut diff never ends inside a
//! file (and still applies, file by file, as far as it goes).

use runledger_domain::{ChangedFile, FileStatus};

/// The most files listed per repository; the rest are counted in the repository's `error`.
pub(crate) const MAX_FILES: usize = 10_000;

/// One `--raw` record: modes, object ids, status letter, paths.
struct Raw {
    old_mode: String,
    new_mode: String,
    old_id: String,
    new_id: String,
    status: char,
    path: String,
    old_path: Option<String>,
}

/// The changed files of `output` (`git diff --raw --numstat -z -M --no-abbrev`): the raw
/// records come first, then the numstat records in the same order. Returns the files (at most
/// `MAX_FILES`) and how many more there were.
pub(crate) fn parse_summary(output: &[u8]) -> Result<(Vec<ChangedFile>, u64), String> {
    let mut tokens = output
        .split(|b| *b == 0)
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .peekable();
    let mut raws = Vec::new();
    while tokens.peek().is_some_and(|t| t.starts_with(':')) {
        let header = tokens.next().unwrap_or_default();
        let fields: Vec<&str> = header[1..].split(' ').collect();
        let [old_mode, new_mode, old_id, new_id, status] = fields[..] else {
            return Err(format!(
                "git printed a raw record it does not write: {header:?}"
            ));
        };
        let letter = status.chars().next().unwrap_or('?');
        let first = tokens.next().ok_or("a raw record without its path")?;
        let (path, old_path) = if matches!(letter, 'R' | 'C') {
            let second = tokens.next().ok_or("a rename without its new path")?;
            (second, Some(first))
        } else {
            (first, None)
        };
        raws.push(Raw {
            old_mode: old_mode.into(),
            new_mode: new_mode.into(),
            old_id: old_id.into(),
            new_id: new_id.into(),
            status: letter,
            path,
            old_path,
        });
    }
    let mut counts = Vec::with_capacity(raws.len());
    while let Some(token) = tokens.next() {
        if token.is_empty() {
            continue;
        }
        let mut parts = token.splitn(3, '\t');
        let (Some(added), Some(deleted), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "git printed a numstat record it does not write: {token:?}"
            ));
        };
        // A rename's paths follow as two tokens of their own.
        if path.is_empty() {
            tokens.next();
            tokens.next();
        }
        let binary = added == "-" && deleted == "-";
        let number = |n: &str| n.parse::<u64>().unwrap_or(0);
        counts.push((number(added), number(deleted), binary));
    }
    if counts.len() != raws.len() {
        return Err(format!(
            "git listed {} changed files but counted lines for {}",
            raws.len(),
            counts.len()
        ));
    }
    let more = raws.len().saturating_sub(MAX_FILES) as u64;
    let files = raws
        .into_iter()
        .zip(counts)
        .take(MAX_FILES)
        .map(|(raw, (additions, deletions, binary))| ChangedFile {
            status: status_of(&raw),
            path: raw.path,
            old_path: raw.old_path,
            additions,
            deletions,
            binary,
        })
        .collect();
    Ok((files, more))
}

/// A link's mode in git's trees.
const LINK: &str = "120000";

fn status_of(raw: &Raw) -> FileStatus {
    match raw.status {
        'D' => FileStatus::Deleted,
        _ if raw.new_mode == LINK => FileStatus::Symlink,
        'A' | 'C' => FileStatus::Added,
        'R' => FileStatus::Renamed,
        'M' if raw.old_mode != raw.new_mode && raw.old_id == raw.new_id => FileStatus::ModeChanged,
        _ => FileStatus::Modified,
    }
}

/// `diff` cut to at most `cap` bytes at the start of a file's section (`diff --git `), and
/// whether it was cut. `over`: git had more to say than `diff` holds (it was stopped), so the
/// last section may be partial even within the cap.
pub(crate) fn cut_diff(mut diff: Vec<u8>, cap: usize, over: bool) -> (Vec<u8>, bool) {
    if !over && diff.len() <= cap {
        return (diff, false);
    }
    const START: &[u8] = b"\ndiff --git ";
    let end = diff
        .windows(START.len())
        .enumerate()
        .filter(|(at, w)| *w == START && *at < cap)
        .map(|(at, _)| at + 1)
        .next_back()
        .unwrap_or(0);
    diff.truncate(end);
    (diff, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_numstat_records_make_the_files() {
        let zero = "0".repeat(40);
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let mut out = Vec::new();
        let mut push = |s: &str| {
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        };
        push(&format!(":000000 100644 {zero} {a} A"));
        push("new.txt");
        push(&format!(":100644 100755 {a} {a} M"));
        push("run.sh");
        push(&format!(":100644 100644 {a} {b} R087"));
        push("old name.txt");
        push("new\tname.txt");
        push(&format!(":000000 120000 {zero} {a} A"));
        push("link");
        push(&format!(":100644 000000 {a} {zero} D"));
        push("gone.bin");
        push("3\t0\tnew.txt");
        push("0\t0\trun.sh");
        push("1\t1\t");
        push("old name.txt");
        push("new\tname.txt");
        push("1\t0\tlink");
        push("-\t-\tgone.bin");
        let (files, more) = parse_summary(&out).expect("parses");
        assert_eq!(more, 0);
        let statuses: Vec<_> = files.iter().map(|f| f.status).collect();
        assert_eq!(
            statuses,
            [
                FileStatus::Added,
                FileStatus::ModeChanged,
                FileStatus::Renamed,
                FileStatus::Symlink,
                FileStatus::Deleted
            ]
        );
        assert_eq!(files[2].path, "new\tname.txt");
        assert_eq!(files[2].old_path.as_deref(), Some("old name.txt"));
        assert_eq!((files[0].additions, files[0].deletions), (3, 0));
        assert!(files[4].binary && !files[0].binary);
    }

    #[test]
    fn a_record_git_does_not_write_is_an_error() {
        assert!(parse_summary(b":100644 M\0x\0").is_err());
        assert_eq!(parse_summary(b"").expect("parses").0, vec![]);
    }

    #[test]
    fn a_diff_is_cut_at_a_file_start() {
        let diff = b"diff --git a/x b/x\n+1\n+2\ndiff --git a/y b/y\n+3\n".to_vec();
        assert_eq!(cut_diff(diff.clone(), 1000, false), (diff.clone(), false));
        let (cut, was) = cut_diff(diff.clone(), 30, false);
        assert!(was);
        assert_eq!(cut, b"diff --git a/x b/x\n+1\n+2\n".to_vec());
        assert_eq!(cut_diff(diff.clone(), 5, false), (Vec::new(), true));
        // Stopped at the cap: the last section read may be partial, so it goes.
        let (cut, was) = cut_diff(diff[..40].to_vec(), 40, true);
        assert!(was);
        assert_eq!(cut, b"diff --git a/x b/x\n+1\n+2\n".to_vec());
    }
}
