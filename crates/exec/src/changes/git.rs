//! How git is run over a workspace the agent controls: the complete environment (no system or
//! user configuration, no replace refs, no optional locks), the configuration forced on top of
//! the repository's own (no fsmonitor, no hooks, no external diff, no filter driver, fixed
//! prefixes), and the shell scripts of the two steps. Git runs as the agent's user inside its
//! sandbox (`command/changes.rs`); these overrides keep a hostile `.git/config` or
//! `.gitattributes` from running anything or shaping what is read.
//!
//! The overrides go through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, not
//! `-c`: a key and its value stay apart however a name is spelled (a filter driver's name may
//! hold `=`), and every git of a script inherits them.

use std::collections::BTreeMap;
use std::path::Path;

/// The configuration every git of the computation runs with, whatever the repository says.
const FORCED: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.untrackedCache", "false"),
    // A write changes a file's ctime, which no unprivileged process can set back: with it
    // compared, a file changed under a copied index's stat data is never taken as unchanged.
    ("core.trustctime", "true"),
    ("core.checkStat", "default"),
    ("core.sparseCheckout", "false"),
    ("index.sparse", "false"),
    ("core.quotePath", "false"),
    ("diff.external", ""),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
    ("diff.renames", "true"),
    ("color.ui", "false"),
    ("core.pager", "cat"),
];

/// Lists the filter drivers the repository's configuration defines, whose commands `git add`
/// would run (`filter.NAME.clean`, `.process`): `filter_overrides` turns them off.
pub(crate) const FILTER_LIST: &str = r#"exec git config -z --get-regexp '^filter\.'"#;

/// The most filter drivers turned off; a configuration with more is not read past.
const MAX_FILTERS: usize = 256;

/// The complete environment of the computation's git processes. `git_dir` and `work_tree`:
/// the repository (its `.git`) and its files, or for a plain workspace the private repository
/// and the workspace; `index`: the temporary index, never the repository's own.
pub(crate) fn safe_env(
    path_var: Option<&str>,
    home: &Path,
    git_dir: &Path,
    work_tree: &Path,
    index: &Path,
    filters: &[String],
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set(
        "PATH",
        path_var
            .unwrap_or("/usr/local/bin:/usr/bin:/bin")
            .to_string(),
    );
    set("HOME", home.display().to_string());
    set("LC_ALL", "C".into());
    set("GIT_CONFIG_NOSYSTEM", "1".into());
    set("GIT_CONFIG_GLOBAL", "/dev/null".into());
    set("GIT_ATTR_NOSYSTEM", "1".into());
    set("GIT_NO_REPLACE_OBJECTS", "1".into());
    set("GIT_OPTIONAL_LOCKS", "0".into());
    set("GIT_TERMINAL_PROMPT", "0".into());
    set("GIT_PAGER", "cat".into());
    set("GIT_DIR", git_dir.display().to_string());
    set("GIT_WORK_TREE", work_tree.display().to_string());
    set("GIT_INDEX_FILE", index.display().to_string());
    if let Some(parent) = work_tree.parent() {
        set("GIT_CEILING_DIRECTORIES", parent.display().to_string());
    }
    let mut forced: Vec<(String, String)> = FORCED
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    forced.extend(filter_overrides(filters));
    set("GIT_CONFIG_COUNT", forced.len().to_string());
    for (n, (key, value)) in forced.into_iter().enumerate() {
        set(&format!("GIT_CONFIG_KEY_{n}"), key);
        set(&format!("GIT_CONFIG_VALUE_{n}"), value);
    }
    env
}

/// The names of the filter drivers `FILTER_LIST`'s output defines (`filter.NAME.KEY\nVALUE`
/// records, NUL-separated), and the settings that turn each off: an empty command is no
/// filter, and a driver that is not required lets the file be read as it is.
fn filter_overrides(names: &[String]) -> Vec<(String, String)> {
    names
        .iter()
        .take(MAX_FILTERS)
        .flat_map(|name| {
            [
                (format!("filter.{name}.clean"), String::new()),
                (format!("filter.{name}.smudge"), String::new()),
                (format!("filter.{name}.process"), String::new()),
                (format!("filter.{name}.required"), "false".to_string()),
            ]
        })
        .collect()
}

/// The driver names in `git config -z --get-regexp '^filter\.'` output.
pub(crate) fn filter_names(output: &[u8]) -> Vec<String> {
    let mut names: Vec<String> = output
        .split(|b| *b == 0)
        .filter_map(|record| {
            let key = record.split(|b| *b == b'\n').next()?;
            let key = String::from_utf8_lossy(key);
            let rest = key.strip_prefix("filter.")?;
            let (name, _) = rest.rsplit_once('.')?;
            Some(name.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// At an execution's start: a repository's commit (`$1` = `repo`), or for a plain workspace
/// (`$1` = `plain`) the tree of its files, written into the private repository.
pub(crate) fn start_script() -> &'static str {
    r#"set -e
if [ "$1" = repo ]; then exec git rev-parse --verify -q 'HEAD^{commit}'; fi
[ -f "$GIT_DIR/HEAD" ] || (unset GIT_WORK_TREE GIT_INDEX_FILE; git init -q --bare "$GIT_DIR" >/dev/null)
git add -A --ignore-errors >/dev/null || true
exec git write-tree"#
}

/// At an execution's end: the working tree into the temporary index (a copy of the
/// repository's own when `$1` names it, with every assume-unchanged and skip-worktree mark
/// taken off so nothing is hidden; `-`: the private index as it is), its tree on the first
/// line, then the raw and numstat records of its difference from `$2`.
pub(crate) fn end_script() -> &'static str {
    r#"set -e
if [ "$1" != - ]; then
  rm -f -- "$GIT_INDEX_FILE" "$GIT_INDEX_FILE.marked"
  if [ -f "$1" ] && [ ! -L "$1" ]; then
    cp -- "$1" "$GIT_INDEX_FILE"
    git ls-files -v -z | grep -z -v '^H ' | sed -z 's/^. //' > "$GIT_INDEX_FILE.marked" || true
    git update-index -z --no-skip-worktree --stdin < "$GIT_INDEX_FILE.marked"
    git update-index -z --no-assume-unchanged --stdin < "$GIT_INDEX_FILE.marked"
  fi
fi
git add -A --ignore-errors >/dev/null || true
tree=$(git write-tree)
printf '%s\n' "$tree"
exec git diff --raw --numstat -z -M --no-abbrev --no-ext-diff --no-textconv --no-color "$2" "$tree" --"#
}

/// `git diff` of `base` to `tree` as a patch `git apply` takes, paths prefixed with `path`
/// (the repository's place in the workspace) unless it is the workspace itself.
pub(crate) fn diff_args(base: &str, tree: &str, path: &str) -> Vec<String> {
    let prefix = match path.trim_matches('/') {
        "" | "." => String::new(),
        p => format!("{}/", p.trim_start_matches("./")),
    };
    [
        "diff",
        "--binary",
        "-M",
        "--full-index",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--src-prefix=a/{prefix}"),
        format!("--dst-prefix=b/{prefix}"),
        base.to_string(),
        tree.to_string(),
        "--".to_string(),
    ])
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_names_are_read_from_the_listing() {
        let out = b"filter.evil.clean\nsh -c x\0filter.a.b=c.process\ny\0filter.evil.smudge\nz\0";
        assert_eq!(filter_names(out), ["a.b=c", "evil"]);
        let env = safe_env(
            None,
            Path::new("/h"),
            Path::new("/w/.git"),
            Path::new("/w"),
            Path::new("/i"),
            &filter_names(out),
        );
        let keys: Vec<&String> = env
            .iter()
            .filter(|(k, _)| k.starts_with("GIT_CONFIG_KEY_"))
            .map(|(_, v)| v)
            .collect();
        assert!(keys.iter().any(|k| *k == "filter.a.b=c.clean"));
        assert!(keys.iter().any(|k| *k == "core.fsmonitor"));
    }

    #[test]
    fn a_repository_in_a_folder_prefixes_its_paths() {
        let args = diff_args("b", "t", "app");
        assert!(args.contains(&"--src-prefix=a/app/".to_string()));
        let args = diff_args("b", "t", ".");
        assert!(args.contains(&"--src-prefix=a/".to_string()));
    }
}
