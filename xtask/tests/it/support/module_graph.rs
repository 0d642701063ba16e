//! The import graph of a crate's modules, read from the `crate::`,
//! `super::` and `self::` paths of its source (comments and literals
//! blanked first, `#[cfg(test)]` modules counted: tests are part of their
//! module), at every level: between the top-level modules, and between the
//! children of each directory module, however deep; and the cycles of a
//! graph, each edge with the first place that makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::rust_text::{blank_comments_and_literals, line_at, matching_brace, rust_files};

/// Modules and the edges between them, each edge with where it is first
/// made (`file:line`).
#[derive(Default)]
pub(crate) struct Graph {
    pub(crate) nodes: BTreeSet<String>,
    pub(crate) edges: BTreeMap<(String, String), String>,
}

impl Graph {
    /// Records `from -> to`, keeping the first place that made it.
    pub(crate) fn add(&mut self, from: &str, to: &str, at: String) {
        self.edges
            .entry((from.to_owned(), to.to_owned()))
            .or_insert(at);
    }

    fn targets(&self, from: &str) -> Vec<&str> {
        self.edges
            .keys()
            .filter(|(a, _)| a == from)
            .map(|(_, b)| b.as_str())
            .collect()
    }

    /// Every module reachable from `start` by one edge or more.
    fn reachable(&self, start: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut stack = self.targets(start);
        while let Some(node) = stack.pop() {
            if seen.insert(node) {
                stack.extend(self.targets(node));
            }
        }
        seen
    }

    /// The cycles: groups of two or more modules that each reach all the
    /// others (strongly connected components), sorted.
    pub(crate) fn cycles(&self) -> Vec<BTreeSet<String>> {
        let reach: BTreeMap<&str, BTreeSet<&str>> = self
            .nodes
            .iter()
            .map(|n| (n.as_str(), self.reachable(n)))
            .collect();
        let mut groups = BTreeSet::new();
        for (&node, reached) in &reach {
            let group: BTreeSet<String> = reached
                .iter()
                .filter(|&&other| other != node && reach[other].contains(node))
                .chain([&node])
                .map(|s| s.to_string())
                .collect();
            if group.len() > 1 {
                groups.insert(group);
            }
        }
        groups.into_iter().collect()
    }

    /// Each cycle as text: its modules, then every edge inside it with
    /// where it is made.
    pub(crate) fn describe_cycles(&self, level: &str) -> Vec<String> {
        let mut out = Vec::new();
        for cycle in self.cycles() {
            let names: Vec<&str> = cycle.iter().map(String::as_str).collect();
            out.push(format!("cycle {level}: {}", names.join(", ")));
            for ((a, b), at) in &self.edges {
                if cycle.contains(a) && cycle.contains(b) {
                    out.push(format!("    {a} -> {b}  ({at})"));
                }
            }
        }
        out
    }
}

/// The levels of a crate's import graph.
pub(crate) struct CrateGraphs {
    /// Between the crate's top-level modules (`lib.rs` and `main.rs` are
    /// the root, not a module).
    pub(crate) top: Graph,
    /// For each directory module (`a`, `a/b`), between its children, files
    /// and folders (its `mod.rs` is the parent, not a sibling).
    pub(crate) siblings: BTreeMap<String, Graph>,
}

impl CrateGraphs {
    /// The graph between the children of the module `parent` (the top
    /// level for the root).
    fn level(&mut self, parent: &[String]) -> &mut Graph {
        if parent.is_empty() {
            &mut self.top
        } else {
            self.siblings.entry(parent.join("/")).or_default()
        }
    }

    fn level_of(&self, parent: &[String]) -> Option<&Graph> {
        if parent.is_empty() {
            Some(&self.top)
        } else {
            self.siblings.get(&parent.join("/"))
        }
    }
}

/// Reads the crate whose sources are in `src`; places are named
/// `{shown}/{file}:{line}`.
pub(crate) fn read_crate(src: &Path, shown: &str) -> CrateGraphs {
    let files: Vec<(String, String)> = rust_files(src)
        .iter()
        .map(|path| {
            let rel = path.strip_prefix(src).unwrap().display().to_string();
            (rel, std::fs::read_to_string(path).unwrap())
        })
        .collect();
    let modules = file_modules(&files);
    let mut graphs = CrateGraphs {
        top: Graph::default(),
        siblings: BTreeMap::new(),
    };
    for module in modules.values() {
        for depth in 0..module.len() {
            let kid = module[depth].clone();
            graphs.level(&module[..depth]).nodes.insert(kid);
        }
    }
    let blanked: BTreeMap<&str, String> = files
        .iter()
        .map(|(rel, text)| (rel.as_str(), blank_comments_and_literals(text)))
        .collect();
    let imports = parent_imports(&blanked, &modules, &graphs);
    for (rel, text) in &blanked {
        if *rel == "main.rs" {
            continue; // the binary's root: its `crate` is another crate
        }
        let module = &modules[*rel];
        for (offset, target) in referenced_modules(text, module) {
            let at = format!("{shown}/{rel}:{}", line_at(text, offset));
            add_edges(&mut graphs, &imports, module, &target, at);
        }
    }
    graphs
}

/// The edges that a file of `module` referring to `target` makes: at each
/// level the two share, from `module`'s child there to `target`'s.
fn add_edges(
    graphs: &mut CrateGraphs,
    imports: &BTreeMap<Vec<String>, Vec<String>>,
    module: &[String],
    target: &[String],
    at: String,
) {
    let mut target = target.to_vec();
    for depth in 0..module.len() {
        target = follow(imports, &target, depth + 1);
        if target.len() <= depth || target[..depth] != module[..depth] {
            return;
        }
        let (from, to) = (&module[depth], &target[depth]);
        let level = graphs.level(&module[..depth]);
        if from != to && level.nodes.contains(to) {
            level.add(from, to, at.clone());
        }
        if from != to {
            return;
        }
    }
}

/// `target` with its first `depth` segments replaced by what they stand
/// for, when they name an import of a parent module.
fn follow(
    imports: &BTreeMap<Vec<String>, Vec<String>>,
    target: &[String],
    depth: usize,
) -> Vec<String> {
    match target.get(..depth).and_then(|head| imports.get(head)) {
        Some(real) => [real.as_slice(), &target[depth..]].concat(),
        None => target.to_vec(),
    }
}

/// The names the parent modules (`lib.rs`, each directory's `mod.rs`)
/// bring in with `use`, each to the path it stands for: with `pub use
/// build::plan;` in `lib.rs`, `crate::plan::Plan` is a path into `build`.
/// A parent is no node of the graph of its children, so a path through it
/// is followed to where it points.
fn parent_imports(
    blanked: &BTreeMap<&str, String>,
    modules: &BTreeMap<String, Vec<String>>,
    graphs: &CrateGraphs,
) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut imports = BTreeMap::new();
    for (rel, text) in blanked {
        let module = &modules[*rel];
        let parent = (*rel == "lib.rs" && module.is_empty()) || rel.ends_with("/mod.rs");
        let children = match graphs.level_of(module) {
            Some(graph) if parent => &graph.nodes,
            _ => continue,
        };
        for leaf in top_level_uses(text) {
            let Some(name) = leaf.name else { continue };
            let real = match leaf.path.first().map(String::as_str) {
                Some("crate" | "self" | "super") => resolve(module, &leaf.path),
                Some(first) if children.contains(first) => Some([module, &leaf.path[..]].concat()),
                _ => None,
            };
            if let Some(real) = real {
                imports.insert([module.as_slice(), &[name]].concat(), real);
            }
        }
    }
    imports
}

/// The leaves of the `use` items of a file itself, not of its inline
/// modules.
fn top_level_uses(blanked: &str) -> Vec<UseLeaf> {
    let toks = tokens(blanked);
    let inline = inline_modules(blanked, &toks);
    let mut leaves = Vec::new();
    for (i, (offset, tok)) in toks.iter().enumerate() {
        let nested = inline
            .iter()
            .any(|(_, start, end)| (*start..*end).contains(offset));
        if *tok == Token::Ident("use") && !nested {
            use_tree(&toks, &mut (i + 1), Vec::new(), &mut leaves);
        }
    }
    leaves
}

/// The module path of each file (`fetch/deb.rs` is `fetch::deb`,
/// `fetch/mod.rs` is `fetch`, `lib.rs` the root); a file brought in by
/// `#[path = "x.rs"] mod name;` belongs to the module that declares it.
fn file_modules(files: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut modules: BTreeMap<String, Vec<String>> = files
        .iter()
        .map(|(rel, _)| {
            let mut parts: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_owned)
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            (rel.clone(), parts)
        })
        .collect();
    for (rel, text) in files {
        let dir = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
        for (file, name) in path_attributes(text) {
            let included = if dir.is_empty() {
                file
            } else {
                format!("{dir}/{file}")
            };
            let mut module = modules[rel].clone();
            module.push(name);
            modules.insert(included, module);
        }
    }
    modules
}

/// `(file, module name)` of each `#[path = "file"] mod name;` in `text`.
fn path_attributes(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("#[path = \"") {
        let rest = &text[at + 10..];
        let Some((file, after)) = rest.split_once("\"]") else {
            continue;
        };
        let decl = after.trim_start().trim_start_matches("pub ").trim_start();
        if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.split(';').next()) {
            out.push((file.to_owned(), name.trim().to_owned()));
        }
    }
    out
}

/// A token of blanked source: an identifier (keywords included), `::`, or
/// one other character; with its byte offset.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    Ident(&'a str),
    PathSep,
    Punct(u8),
}

fn tokens(blanked: &str) -> Vec<(usize, Token<'_>)> {
    let b = blanked.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if ident(b[i]) {
            let end = (i..b.len()).find(|&j| !ident(b[j])).unwrap_or(b.len());
            out.push((i, Token::Ident(&blanked[i..end])));
            i = end;
        } else if b[i..].starts_with(b"::") {
            out.push((i, Token::PathSep));
            i += 2;
        } else {
            if !b[i].is_ascii_whitespace() {
                out.push((i, Token::Punct(b[i])));
            }
            i += 1;
        }
    }
    out
}

/// Every module path that blanked source of `module` refers to, resolved
/// to a path from the crate root, with the offset where it is named: paths
/// in expressions and types (`crate::x::f()`, `super::y::T`) and every
/// leaf of a `use` tree (`use super::{a, b::{c, d}}`).
pub(crate) fn referenced_modules(blanked: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let toks = tokens(blanked);
    let inline = inline_modules(blanked, &toks);
    let mut out = Vec::new();
    let mut paths = Vec::new();
    for i in 0..toks.len() {
        let after_sep = i > 0 && toks[i - 1].1 == Token::PathSep;
        let before_sep = toks.get(i + 1).is_some_and(|t| t.1 == Token::PathSep);
        match toks[i].1 {
            Token::Ident("use") => {
                let mut leaves = Vec::new();
                use_tree(&toks, &mut (i + 1), Vec::new(), &mut leaves);
                paths.extend(leaves.into_iter().map(|leaf| (leaf.offset, leaf.path)));
            }
            Token::Ident("crate" | "super" | "self") if before_sep && !after_sep => {
                paths.push(expression_path(&toks, i));
            }
            _ => {}
        }
    }
    for (offset, path) in paths {
        let mut base = module.to_vec();
        base.extend(
            inline
                .iter()
                .filter(|(_, start, end)| (*start..*end).contains(&offset))
                .map(|(name, _, _)| name.clone()),
        );
        if let Some(resolved) = resolve(&base, &path) {
            out.push((offset, resolved));
        }
    }
    out
}

/// The inline modules (`mod tests { ... }`): name and byte range, outer
/// ones first.
fn inline_modules(blanked: &str, toks: &[(usize, Token)]) -> Vec<(String, usize, usize)> {
    toks.windows(3)
        .filter_map(|w| match (&w[0].1, &w[1].1, &w[2].1) {
            (Token::Ident("mod"), Token::Ident(name), Token::Punct(b'{')) => {
                let close = matching_brace(blanked, w[2].0)?;
                Some((name.to_string(), w[2].0, close))
            }
            _ => None,
        })
        .collect()
}

/// `crate::a::b` from token `i` on, up to the first token that is not a
/// segment (`{`, `*`, `<`, `(`).
fn expression_path(toks: &[(usize, Token)], mut i: usize) -> (usize, Vec<String>) {
    let start = toks[i].0;
    let mut path = Vec::new();
    while let Some((_, Token::Ident(name))) = toks.get(i) {
        path.push(name.to_string());
        if toks.get(i + 1).map(|t| &t.1) != Some(&Token::PathSep) {
            break;
        }
        i += 2;
    }
    (start, path)
}

/// One leaf of a `use` tree: where it is, its full path, and the name it
/// binds (`None` for a glob).
struct UseLeaf {
    offset: usize,
    path: Vec<String>,
    name: Option<String>,
}

/// Expands the `use` tree at token `*i` into its leaves, each a full path
/// with the offset of its last segment: `prefix::{a, b::c as d, e::*}`
/// gives `prefix::a`, `prefix::b::c` (binding `d`) and `prefix::e`;
/// `self` in braces is the prefix itself.
fn use_tree(toks: &[(usize, Token)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<UseLeaf>) {
    let mut path = prefix;
    let mut at = toks.get(*i).map_or(0, |t| t.0);
    loop {
        match toks.get(*i).map(|t| &t.1) {
            Some(Token::Ident(name)) => {
                if *name != "self" || path.is_empty() {
                    path.push(name.to_string());
                }
                at = toks[*i].0;
                *i += 1;
            }
            Some(Token::Punct(b'{')) => {
                *i += 1;
                while let Some(tok) = toks.get(*i) {
                    match tok.1 {
                        Token::Punct(b'}') => break,
                        Token::Punct(b',') => *i += 1,
                        _ => use_tree(toks, i, path.clone(), out),
                    }
                }
                *i += 1;
                return;
            }
            Some(Token::Punct(b'*')) => {
                *i += 1;
                out.push(UseLeaf {
                    offset: at,
                    path,
                    name: None,
                });
                return;
            }
            _ => break,
        }
        if toks.get(*i).map(|t| &t.1) != Some(&Token::PathSep) {
            break;
        }
        *i += 1;
    }
    let mut name = path.last().cloned();
    if toks.get(*i).map(|t| &t.1) == Some(&Token::Ident("as")) {
        if let Some((_, Token::Ident(alias))) = toks.get(*i + 1) {
            name = Some(alias.to_string());
        }
        *i += 2;
    }
    out.push(UseLeaf {
        offset: at,
        path,
        name,
    });
}

/// `path` as seen from module `base`, from the crate root; `None` for a
/// path that starts elsewhere (another crate, `std`) or climbs past the
/// root.
pub(crate) fn resolve(base: &[String], path: &[String]) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some([base, rest].concat()),
        "super" => {
            let mut module = base.to_vec();
            let mut rest = path;
            while let Some(("super", tail)) = rest.split_first().map(|(s, t)| (s.as_str(), t)) {
                module.pop()?;
                rest = tail;
            }
            Some([module.as_slice(), rest].concat())
        }
        _ => None,
    }
}
