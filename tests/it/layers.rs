//! Inside each crate of the workspace the files import one another without a circle: the
//! graph of a folder's files (a subfolder counts as one node; the crate's `src/` is a folder
//! too) is read from their `crate::`, `super::` and `self::` paths, test modules left out.
//! `lib.rs` and `mod.rs` are the folders' tables of contents: a name one re-exports counts as
//! an import of the file that defines it; what they still define themselves is outside this
//! check. Which crate may use which is the crates' own `Cargo.toml` (tests/it/architecture.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::common::rust_files;

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

/// Reads a `use` tree or an inline path: segments joined by `::`, `{…}` groups, `as` aliases.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn skip_whitespace(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_whitespace();
        if self.text[self.at..].starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    /// An identifier, or `*` for a glob.
    fn segment(&mut self) -> Option<String> {
        self.skip_whitespace();
        let rest = &self.text[self.at..];
        if rest.starts_with('*') {
            self.at += 1;
            return Some("*".into());
        }
        let name = ident(rest);
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        self.at += name.len();
        Some(name.to_string())
    }

    /// The paths of one tree under `prefix`, each with the name it is known by (its alias or
    /// its last segment).
    fn tree(&mut self, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
        if self.eat("{") {
            loop {
                if self.eat("}") {
                    return;
                }
                let before = self.at;
                self.tree(prefix, out);
                if self.eat(",") {
                    continue;
                }
                if self.eat("}") || self.at == before {
                    return;
                }
            }
        }
        let mut path = prefix.to_vec();
        while let Some(segment) = self.segment() {
            path.push(segment);
            let before = self.at;
            if !self.eat("::") {
                self.at = before;
                break;
            }
            self.skip_whitespace();
            if self.text[self.at..].starts_with('{') {
                self.tree(&path, out);
                return;
            }
        }
        if path.len() == prefix.len() {
            return;
        }
        let before = self.at;
        let alias = if self.eat("as ") {
            self.segment()
        } else {
            None
        };
        if alias.is_none() {
            self.at = before;
        }
        let name = alias.unwrap_or_else(|| path[path.len() - 1].clone());
        out.push((path, name));
    }
}

/// Every path the code names from `crate::`, `super::` or `self::`, groups expanded:
/// `super::{a, b::{c, d}}` gives `super::a`, `super::b::c` and `super::b::d`.
fn rooted_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let name = ident(rest);
        if name.is_empty() {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let before = code[..at].chars().next_back().unwrap_or(' ');
        let rooted = matches!(name, "crate" | "super" | "self")
            && !matches!(before, ':' | '$')
            && rest[name.len()..].trim_start().starts_with("::");
        if rooted {
            let mut cursor = Cursor { text: code, at };
            let mut found = Vec::new();
            cursor.tree(&[], &mut found);
            out.extend(found.into_iter().map(|(path, _)| path));
        }
        at += name.len();
    }
    out
}

/// What a folder's `mod.rs` re-exports from its children.
#[derive(Default)]
struct Reexports {
    /// A name → the child it comes from.
    named: BTreeMap<String, String>,
    /// The children re-exported with a glob.
    globs: BTreeSet<String>,
}

fn reexports(code: &str) -> Reexports {
    let mut named = BTreeMap::new();
    let mut globs = BTreeSet::new();
    for statement in code.split(';') {
        let statement = statement.trim_start();
        let Some(tree) = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|start| statement.strip_prefix(start))
        else {
            continue;
        };
        let mut found = Vec::new();
        Cursor { text: tree, at: 0 }.tree(&[], &mut found);
        for (path, name) in found {
            let path = match path.first().map(String::as_str) {
                Some("self") => &path[1..],
                _ => &path[..],
            };
            if let [child, .., last] = path {
                if last == "*" {
                    globs.insert(child.clone());
                } else {
                    named.insert(name, child.clone());
                }
            }
        }
    }
    Reexports { named, globs }
}

/// Whether the code defines a public item called `name`.
fn defines(code: &str, name: &str) -> bool {
    ["pub ", "pub(crate) ", "pub(super) "]
        .iter()
        .any(|visibility| {
            [
                "fn", "struct", "enum", "const", "static", "type", "trait", "mod",
            ]
            .iter()
            .any(|kind| {
                let head = format!("{visibility}{kind} {name}");
                code.match_indices(&head).any(|(at, _)| {
                    !code[at + head.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
        })
}

/// The source without comments and without its `#[cfg(test)] mod tests` (a test module's
/// `super` is the file itself).
fn production_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|pair| {
            pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod ")
        })
        .unwrap_or(lines.len());
    code(&lines[..end].join("\n"))
}

/// The module path of a file or folder under `src/`: `http/admin.rs` is `http::admin`,
/// `http/wire/mod.rs` and `http/wire` are `http::wire`.
fn module_path(file: &Path) -> Vec<String> {
    let mut path: Vec<String> = file
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => name.to_str().map(String::from),
            _ => None,
        })
        .collect();
    if let Some(last) = path.pop() {
        match last.strip_suffix(".rs") {
            Some("mod" | "lib") => {}
            Some(stem) => path.push(stem.to_string()),
            None => path.push(last),
        }
    }
    path
}

/// folder → (file or subfolder → (file or subfolder it imports → the names it takes)).
type FolderGraphs = BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, BTreeSet<String>>>>;

/// The import graph of each folder's files, from sources given by their path under `src/`.
fn folder_graphs(sources: &[(PathBuf, String)]) -> FolderGraphs {
    let folders: BTreeSet<Vec<String>> = sources
        .iter()
        .filter_map(|(file, _)| file.parent().map(module_path))
        .collect();
    // Each module's path, whether it is a folder's own file (`x/mod.rs`, or `x.rs` beside a
    // folder `x/`), and its code.
    let modules: Vec<(Vec<String>, bool, String)> = sources
        .iter()
        .map(|(file, text)| {
            let path = module_path(file);
            let is_mod = file
                .file_name()
                .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
                || folders.contains(&path);
            (path, is_mod, production_code(text))
        })
        .collect();
    // The folders and their nodes: every module below a folder is a node of it.
    let mut nodes: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for (path, is_mod, _) in &modules {
        let depth = if *is_mod { path.len() } else { path.len() - 1 };
        for folder in 0..=depth {
            if let Some(node) = path.get(folder) {
                nodes
                    .entry(path[..folder].to_vec())
                    .or_default()
                    .insert(node.clone());
            }
        }
    }
    let tables: BTreeMap<&[String], Reexports> = modules
        .iter()
        .filter(|(_, is_mod, _)| *is_mod)
        .map(|(path, _, text)| (&path[..], reexports(text)))
        .collect();
    let defined_by = |folder: &[String], child: &str, name: &str| {
        modules.iter().any(|(path, _, text)| {
            path.len() == folder.len() + 1
                && path.starts_with(folder)
                && path[folder.len()] == child
                && defines(text, name)
        })
    };
    let mut graphs = FolderGraphs::new();
    for (path, is_mod, text) in &modules {
        let mut imports: Vec<Vec<String>> = Vec::new();
        for rooted in rooted_paths(text) {
            let (base, rest) = match rooted[0].as_str() {
                "crate" => (Vec::new(), &rooted[1..]),
                "self" => (path.clone(), &rooted[1..]),
                _ => {
                    let ups = rooted.iter().take_while(|s| *s == "super").count();
                    let Some(kept) = path.len().checked_sub(ups) else {
                        continue;
                    };
                    (path[..kept].to_vec(), &rooted[ups..])
                }
            };
            imports.push(base.into_iter().chain(rest.iter().cloned()).collect());
        }
        for (folder, folder_nodes) in &nodes {
            // The node this file is in `folder`: its own file, or the subfolder it lies in;
            // a folder's own file (`mod.rs`, or `x.rs` beside `x/`) is none.
            if !path.starts_with(folder) || (path.len() == folder.len() && *is_mod) {
                continue;
            }
            let Some(from) = path.get(folder.len()) else {
                continue;
            };
            for target in &imports {
                if !target.starts_with(folder) {
                    continue;
                }
                let Some(name) = target.get(folder.len()) else {
                    continue;
                };
                let to = if folder_nodes.contains(name) {
                    Some(name.clone())
                } else if let Some(table) = tables.get(&folder[..]) {
                    table.named.get(name).cloned().or_else(|| {
                        table
                            .globs
                            .iter()
                            .find(|child| defined_by(folder, child, name))
                            .cloned()
                    })
                } else {
                    None
                };
                let Some(to) = to else { continue };
                if to == *from {
                    continue;
                }
                let taken = target[folder.len()..].join("::");
                graphs
                    .entry(folder.clone())
                    .or_default()
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(taken);
            }
        }
    }
    graphs
}

/// Every circle of each folder, as its files and the imports between them: a strongly connected
/// component of the folder's graph with more than one node.
fn folder_circles(krate: &str, sources: &[(PathBuf, String)]) -> Vec<String> {
    type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;
    fn reachable<'a>(from: &'a str, graph: &'a Edges) -> BTreeSet<&'a str> {
        let mut seen = BTreeSet::new();
        let mut pending = vec![from];
        while let Some(node) = pending.pop() {
            for to in graph.get(node).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(to.as_str()) {
                    pending.push(to);
                }
            }
        }
        seen
    }
    let mut circles = Vec::new();
    for (folder, graph) in folder_graphs(sources) {
        let reach: BTreeMap<&str, BTreeSet<&str>> = graph
            .keys()
            .map(|node| (node.as_str(), reachable(node, &graph)))
            .collect();
        let mut placed = BTreeSet::new();
        for (node, from_node) in &reach {
            if placed.contains(node) || !from_node.contains(node) {
                continue;
            }
            let members: BTreeSet<&str> = from_node
                .iter()
                .copied()
                .filter(|other| reach.get(other).is_some_and(|r| r.contains(node)))
                .collect();
            placed.extend(members.iter().copied());
            let edges: Vec<String> = members
                .iter()
                .flat_map(|from| {
                    graph[*from]
                        .iter()
                        .filter(|(to, _)| members.contains(to.as_str()))
                        .map(move |(to, names)| {
                            let names = Vec::from_iter(names.iter().cloned()).join(", ");
                            format!("{from} → {to} ({names})")
                        })
                })
                .collect();
            let mut place = Path::new(krate).join("src");
            if !folder.is_empty() {
                place.push(folder.join("/"));
            }
            circles.push(format!("{}: {}", place.display(), edges.join("; ")));
        }
    }
    circles
}

/// Every crate's directory, and its sources by their path under its `src/`.
fn crates() -> Vec<(String, Vec<(PathBuf, String)>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.to_path_buf()];
    let members = std::fs::read_dir(root.join("crates")).expect("crates/");
    dirs.extend(members.map(|e| e.expect("a directory entry").path()));
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let src = dir.join("src");
            let mut files = Vec::new();
            rust_files(&src, &mut files);
            files.sort();
            let sources = files
                .into_iter()
                .map(|file| {
                    let text = std::fs::read_to_string(&file)
                        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                    (file.strip_prefix(&src).unwrap_or(&file).to_path_buf(), text)
                })
                .collect();
            let name = dir.strip_prefix(root).unwrap_or(&dir).display().to_string();
            (name, sources)
        })
        .collect()
}

#[test]
fn the_files_of_each_folder_import_one_another_without_a_circle() {
    let crates = crates();
    assert!(crates.len() > 5, "the workspace's crates are under crates/");
    let circles: Vec<String> = crates
        .iter()
        .flat_map(|(name, sources)| folder_circles(name, sources))
        .collect();
    assert!(
        circles.is_empty(),
        "import circles between the files of a folder:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_folder_check_finds_circles_through_groups_reexports_and_subfolders() {
    let source = |path: &str, text: &str| (PathBuf::from(path), text.to_string());
    let found = folder_circles("crates/x", &[
        // Through a group and a name `mod.rs` re-exports.
        source("a/mod.rs", "mod x;\nmod y;\npub use y::Wanted;"),
        source("a/x.rs", "use super::{Wanted, y as _};"),
        source("a/y.rs", "use crate::a::x::f;\n#[cfg(test)]\nmod tests {}"),
        // Through a glob re-export, and from a subfolder back to its parent's file.
        source("b/mod.rs", "mod deep;\nmod z;\npub use z::*;"),
        source("b/z.rs", "pub struct Found;\nfn g() { super::deep::h(); }"),
        source("b/deep/mod.rs", "mod leaf;"),
        source("b/deep/leaf.rs", "use super::super::Found;"),
        // Through `x.rs`, the own file of a folder `x/`.
        source("d.rs", "mod e;\nmod f;\npub use e::Thing;"),
        source("d/e.rs", "use super::f::g;"),
        source("d/f.rs", "use super::Thing;"),
        // Between the files at the crate's root, through `crate::`.
        source("lib.rs", "mod g;\nmod h;"),
        source("g.rs", "use crate::h::x;"),
        source("h.rs", "fn f() { crate::g::y(); }"),
        // No circle: a test module's `super::*` and a comment are not imports.
        source("c/mod.rs", "mod p;\nmod q;"),
        source("c/p.rs", "use super::q::g; // super::q"),
        source("c/q.rs", "// use super::p;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::c::p::f;\n}"),
    ]);
    assert_eq!(
        found,
        vec![
            "crates/x/src: g → h (h::x); h → g (g::y)".to_string(),
            "crates/x/src/a: x → y (Wanted, y); y → x (x::f)".to_string(),
            "crates/x/src/b: deep → z (Found); z → deep (deep::h)".to_string(),
            "crates/x/src/d: e → f (f::g); f → e (Thing)".to_string(),
        ]
    );
}

#[test]
fn lib_and_mod_files_are_tables_of_contents() {
    // Declarations, re-exports and attributes only: whatever a crate or folder does lives in a
    // file named for it, so `lib.rs` and `mod.rs` read as the list of what is inside.
    const DEFINITIONS: &[&str] = &[
        "fn ",
        "struct ",
        "enum ",
        "impl ",
        "impl<",
        "const ",
        "static ",
        "trait ",
        "type ",
        "macro_rules!",
        "async fn ",
    ];
    let mut found = Vec::new();
    for (name, sources) in crates() {
        for (file, text) in &sources {
            let table = file
                .file_name()
                .is_some_and(|n| n == "lib.rs" || n == "mod.rs");
            if !table {
                continue;
            }
            for (n, line) in production_code(text).lines().enumerate() {
                let line = line.trim_start();
                let line = ["pub(crate) ", "pub(super) ", "pub "]
                    .iter()
                    .find_map(|v| line.strip_prefix(v))
                    .unwrap_or(line);
                if DEFINITIONS.iter().any(|d| line.starts_with(d)) {
                    let place = Path::new(&name).join("src").join(file);
                    found.push(format!("{}:{}: {}", place.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "definitions in a table of contents:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_file_holds_more_than_600_lines_of_code_before_its_tests() {
    const MOST: usize = 600;
    let mut found = Vec::new();
    for (name, sources) in crates() {
        for (file, text) in &sources {
            let lines = production_code(text).lines().count();
            if lines > MOST {
                let place = Path::new(&name).join("src").join(file);
                found.push(format!("{}: {lines} lines", place.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "files over {MOST} lines of code (split them at a seam):\n{}",
        found.join("\n")
    );
}
