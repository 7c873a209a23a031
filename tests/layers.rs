//! The folder import graph of `src/` has no cycle, and every import between the modules listed
//! in `LAYERS` points down (docs/decisions/0018-layers.md). The graph is read from the source:
//! every `crate::…` path (in `use` lines, groups `use crate::{a, b}` and inline paths) names the
//! top-level module it reaches; comments are left out. A module missing from `LAYERS` still
//! takes part in the cycle check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first. A module may import only modules on an earlier line;
/// modules on one line import none of each other.
const LAYERS: &[&[&str]] = &[
    // Leaves: no import of another module of the crate, except `domain`'s types.
    &[
        "domain",
        "memo",
        "memory",
        "metrics",
        "notify",
        "telemetry",
        "tls",
        "uid_range",
    ],
    &["clock", "harness"],
    // The event log; what a failure of it means to a caller; the handles over its API keys and
    // idempotency records; the JSON formats shared by the API and the CLI; the read index.
    &["store"],
    &["failure"],
    &["api_keys", "idempotency"],
    &["format"],
    &["projection"],
    // The configuration reads the file into values (`harness` describes how environments run).
    &["config"],
    // Agent processes, driven by the configuration, recording through the store; webhook
    // deliveries, written beside the log and sent from it.
    &["exec", "webhooks"],
    // The run actors and the `Runs` handle: decide, append, project, start executions.
    &["actor"],
    // The HTTP API, then the wiring of a server, then the command line.
    &["http"],
    &["startup"],
    &["cli"],
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a file under `src/` belongs to; `None` for the crate roots.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(name) => Some(name.to_string()),
        None => Some(first),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments (doc comments cite paths that are not imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a piece of code names through `crate::`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `runledger::crate::` does not occur; skip identifiers that merely end in "crate".
        if at > 0 {
            let before = code[..at].chars().next_back().unwrap_or(' ');
            if before.is_ascii_alphanumeric() || before == '_' {
                continue;
            }
        }
        let rest = code[at + "crate::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the first segment of each top-level item.
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        item_start = false;
                        let name = ident(&group[i..]);
                        if !name.is_empty() && name != "self" {
                            out.insert(name.to_string());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// module → (imported module → the files that import it).
fn graph() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let Some(from) = module_of(&src, file) else {
            continue;
        };
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let edges = graph.entry(from.clone()).or_default();
        for to in imports(&code(&text)) {
            if to != from && modules.contains(&to) {
                let shown = file
                    .strip_prefix(&src)
                    .unwrap_or(file)
                    .display()
                    .to_string();
                edges.entry(to).or_default().insert(shown);
            }
        }
    }
    graph
}

#[test]
fn the_parser_reads_paths_groups_and_nested_groups() {
    let found = imports(&code(
        "use crate::store::{self, Store};\nuse crate::{clock, domain::{Run, Event}, self};\n\
         let x = crate::exec::cgroup::Limits::default(); // crate::http in a comment\n\
         fn f(_: &crate::config::Config) {}\nlet _ = mycrate::actor;",
    ));
    let want: BTreeSet<String> = ["store", "clock", "domain", "exec", "config"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(found, want);
}

#[test]
fn every_listed_module_exists_once() {
    let listed: Vec<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let unique: BTreeSet<&str> = listed.iter().copied().collect();
    assert_eq!(
        listed.len(),
        unique.len(),
        "a module is listed twice in LAYERS"
    );
    let graph = graph();
    for module in listed {
        assert!(
            graph.contains_key(module),
            "LAYERS lists `{module}`, which src/ does not have"
        );
    }
}

#[test]
fn imports_between_listed_modules_point_down() {
    let mut wrong = Vec::new();
    for (from, edges) in graph() {
        for (to, files) in edges {
            if let (Some(a), Some(b)) = (rank(&from), rank(&to)) {
                if a <= b {
                    wrong.push(format!(
                        "{from} → {to} ({})",
                        Vec::from_iter(files).join(", ")
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering of tests/layers.rs:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_folder_import_graph_has_no_cycle() {
    let graph = graph();
    // Depth-first search; a module met again while still on the path closes a cycle.
    fn visit<'a>(
        module: &'a str,
        graph: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| *m == module) {
            let mut cycle: Vec<String> = path[at..].iter().map(|m| m.to_string()).collect();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module);
        for to in graph.get(module).into_iter().flat_map(|e| e.keys()) {
            if let Some(cycle) = visit(to, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module);
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        let cycle = visit(module, &graph, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import cycle: {}",
            cycle.unwrap_or_default().join(" → ")
        );
    }
}
