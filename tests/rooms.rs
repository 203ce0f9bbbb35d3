//! The rooms of `src/` (a top-level file or folder) import only downward,
//! in the order docs/development.md gives, and no two import each other:
//! a `use crate::ROOM` from a lower room to a higher one fails here,
//! naming the file and the line, and so does a room the order does not
//! place. Tests (`#[cfg(test)]` modules) may look anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The order, top room first, each level's rooms together, as the
/// sentence in docs/development.md gives it (its one source).
fn levels() -> Vec<Vec<String>> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/development.md"))
            .expect("docs/development.md");
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let start = flat
        .find("with no circle: ")
        .expect("docs/development.md names the rooms' order after \"with no circle: \"")
        + "with no circle: ".len();
    let end = start
        + flat[start..]
            .find('.')
            .expect("the order ends with a full stop");
    flat[start..end]
        .split('>')
        .map(|level| {
            level
                .split(',')
                .map(|room| room.trim().trim_matches('`').to_string())
                .filter(|room| !room.is_empty())
                .collect()
        })
        .collect()
}

/// Every .rs file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's room: its top-level file's stem or its top-level folder.
fn room_of(src: &Path, file: &Path) -> String {
    let first = file.strip_prefix(src).unwrap().components().next().unwrap();
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

/// The rooms a file's code (before its first `#[cfg(test)]`) names as
/// `crate::ROOM`, with the line of each.
fn imports(text: &str) -> Vec<(String, usize)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let room: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !room.is_empty() {
                out.push((room, n + 1));
            }
        }
    }
    out
}

#[test]
fn every_room_imports_only_rooms_below_it_or_beside_it_and_none_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let levels = levels();
    let level: BTreeMap<&str, usize> = levels
        .iter()
        .enumerate()
        .flat_map(|(i, rooms)| rooms.iter().map(move |r| (r.as_str(), i)))
        .collect();
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut problems = Vec::new();
    let mut arrows: BTreeSet<(String, String)> = BTreeSet::new();
    for file in &files {
        let from = room_of(&src, file);
        // lib.rs declares the rooms; a `tests.rs` is a test module.
        if from == "lib" || file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let Some(&from_level) = level.get(from.as_str()) else {
            problems.push(format!(
                "room `{from}` ({}) is not in docs/development.md's order",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (to, line) in imports(&text) {
            if to == from || !level.contains_key(to.as_str()) {
                continue;
            }
            if level[to.as_str()] < from_level {
                problems.push(format!(
                    "{}:{line}: `{from}` imports `crate::{to}`, a room above it",
                    file.display()
                ));
            }
            arrows.insert((from.clone(), to));
        }
    }
    for (from, to) in &arrows {
        if arrows.contains(&(to.clone(), from.clone())) && from < to {
            problems.push(format!("`{from}` and `{to}` import each other"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_order_is_read_from_the_doc() {
    let levels = levels();
    assert_eq!(
        levels.first().map(|l| l.as_slice()),
        Some(&["main".to_string()][..])
    );
    assert!(levels.iter().flatten().any(|r| r == "apply"), "{levels:?}");
    assert_eq!(
        imports("use crate::plan::Plan;\nfn f() { crate::system::x() }\n#[cfg(test)]\nuse crate::apply;"),
        vec![("plan".to_string(), 1), ("system".to_string(), 2)]
    );
}
