//! The diff view on diffs made by real git: every kind of change a workspace sees, hostile
//! paths and contents, and a 10 MB diff that still renders to a bounded page.

use std::path::Path;
use std::process::Command;

use super::parse::{parse, Status};
use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "core.quotepath=true",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with a first commit, changed by `change`, and the diff of everything since
/// (staged with `add -A`, renames found).
fn diff_of(setup: impl Fn(&Path), change: impl Fn(&Path)) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    git(d, &["init", "-q"]);
    setup(d);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base", "--allow-empty"]);
    change(d);
    git(d, &["add", "-A"]);
    git(d, &["diff", "--cached", "-M", "--binary", "HEAD"])
}

fn write(dir: &Path, name: &str, text: &[u8]) {
    std::fs::write(dir.join(name), text).expect("write");
}

#[test]
fn every_kind_of_change_is_read_with_its_status_and_counts() {
    use std::os::unix::fs::PermissionsExt;
    let lines: String = (0..40).map(|i| format!("line {i}\n")).collect();
    let diff = diff_of(
        |d| {
            write(d, "modified.txt", b"one\ntwo\nthree\n");
            write(d, "deleted.txt", b"gone\n");
            write(d, "old name.txt", lines.as_bytes());
            write(d, "script.sh", b"echo hi\n");
            write(d, "image.bin", &[0, 1, 2, 3, 255]);
        },
        |d| {
            write(d, "modified.txt", b"one\n2\nthree\nfour\n");
            std::fs::remove_file(d.join("deleted.txt")).expect("rm");
            write(d, "added.txt", b"new\n");
            std::fs::rename(d.join("old name.txt"), d.join("new name.txt")).expect("mv");
            std::fs::set_permissions(d.join("script.sh"), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            write(d, "image.bin", &[0, 9, 9, 9, 255, 0]);
            std::os::unix::fs::symlink("/etc/shadow", d.join("link")).expect("symlink");
        },
    );
    let files = parse(&diff);
    let by_path = |p: &str| {
        files
            .iter()
            .find(|f| f.path() == p)
            .unwrap_or_else(|| panic!("{p} in {files:?}"))
    };
    let m = by_path("modified.txt");
    assert_eq!(
        (m.status, m.additions, m.deletions),
        (Status::Modified, 2, 1)
    );
    let d = by_path("deleted.txt");
    assert_eq!(
        (d.status, d.additions, d.deletions),
        (Status::Deleted, 0, 1)
    );
    assert_eq!(by_path("added.txt").status, Status::Added);
    let r = by_path("new name.txt");
    assert_eq!(
        (r.status, r.old_path.as_str()),
        (Status::Renamed, "old name.txt")
    );
    let s = by_path("script.sh");
    assert_eq!(
        (s.status, s.old_mode, s.new_mode),
        (Status::ModeChanged, Some("100644"), Some("100755"))
    );
    assert!(by_path("image.bin").binary);
    let link = by_path("link");
    assert_eq!(
        (link.status, link.new_mode),
        (Status::Added, Some("120000"))
    );
    // The link is shown as the path it names, never the target's content.
    assert!(link.lines.iter().any(|(_, l)| *l == "+/etc/shadow"));
    let html = diff_html(&diff, Caps::default(), None);
    assert!(html.contains("<span class=\"add\">+2</span>"), "{html}");
    assert!(html.contains("<span class=\"del\">-two</span>"), "{html}");
    assert!(html.contains("<code>new name.txt</code> <span class=\"tag\">renamed</span> from <code>old name.txt</code>"), "{html}");
    assert!(
        html.contains("Binary file; its content is not shown."),
        "{html}"
    );
    assert!(html.contains("100644 → 100755"), "{html}");
    assert_eq!(
        html.matches("<details class=\"diff-file\"").count(),
        files.len()
    );
}

#[test]
fn counts_match_git_numstat() {
    let diff_and_numstat = {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        git(d, &["init", "-q"]);
        let text: String = (0..300).map(|i| format!("{i}\n")).collect();
        write(d, "a.txt", text.as_bytes());
        write(d, "b.txt", b"x\n");
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "base"]);
        let changed: String = (0..300)
            .map(|i| {
                if i % 7 == 0 {
                    format!("changed {i}\n")
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        write(d, "a.txt", changed.as_bytes());
        write(d, "c.txt", b"+++ not a header\n--- nor this\n");
        git(d, &["add", "-A"]);
        (
            git(d, &["diff", "--cached", "-M", "HEAD"]),
            git(d, &["diff", "--cached", "-M", "--numstat", "HEAD"]),
        )
    };
    let (diff, numstat) = diff_and_numstat;
    let files = parse(&diff);
    for row in numstat.lines() {
        let mut cols = row.split('\t');
        let (add, del, path) = (cols.next(), cols.next(), cols.next());
        let file = files.iter().find(|f| Some(f.path()) == path).expect("file");
        assert_eq!(Some(file.additions.to_string().as_str()), add, "{row}");
        assert_eq!(Some(file.deletions.to_string().as_str()), del, "{row}");
    }
    assert_eq!(files.len(), numstat.lines().count());
}

#[test]
fn hostile_paths_and_contents_are_escaped() {
    let diff = diff_of(
        |_| {},
        |d| {
            write(
                d,
                "<img src=x onerror=alert(1)>.txt",
                b"<script>alert(1)</script>\n",
            );
            write(d, "tab\there \"q\" \u{e9}.txt", b"x\n");
        },
    );
    let files = parse(&diff);
    assert!(
        files
            .iter()
            .any(|f| f.path() == "tab\there \"q\" \u{e9}.txt"),
        "{files:?}"
    );
    let html = diff_html(&diff, Caps::default(), None);
    assert!(
        !html.contains("<script>") && !html.contains("<img"),
        "{html}"
    );
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;.txt"),
        "{html}"
    );
    assert!(
        html.contains("+&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
}

#[test]
fn a_ten_megabyte_diff_renders_to_a_bounded_page() {
    let diff = diff_of(
        |_| {},
        |d| {
            // 300 files of about 34 KB each: over 10 MB of added lines.
            let body: String = (0..1000)
                .map(|i| format!("added line number {i:>20}\n"))
                .collect();
            for f in 0..300 {
                write(d, &format!("f{f:03}.txt"), body.as_bytes());
            }
        },
    );
    assert!(diff.len() > 10_000_000, "{}", diff.len());
    let started = std::time::Instant::now();
    let html = diff_html(&diff, Caps::default(), Some("/patch?x=1&y=2"));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(html.len() < 2_000_000, "{}", html.len());
    assert!(html.contains("300 files changed, <span class=\"add\">+300000</span>"));
    // Files past the cap are listed, not shown; the whole patch is a link away.
    assert!(html.contains("<p class=\"diff-file\"><code>f299.txt</code>"));
    assert!(html.contains("<a href=\"/patch?x=1&amp;y=2\">the whole patch</a>"));
}

#[test]
fn damaged_text_is_shown_without_failing() {
    let text =
        "garbage before\ndiff --git a/x b/x\n@@ nonsense\n+ok\n\u{0}\ndiff --git \"a/unterminated";
    let files = parse(text);
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].additions, 1);
    let html = diff_html(text, Caps::default(), None);
    assert!(html.contains("2 files changed"));
}
