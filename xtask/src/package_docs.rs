//! The documentation the Debian package installs under
//! /usr/share/doc/pimigrate: README.md and every page it links, directly or
//! through another page, with links that work there. A page over 4 KiB is
//! installed compressed (`gzip -9n`, as Debian Policy 12.3 and
//! dh_compress do), and links to it name the `.gz` file; a link to a file
//! that is not installed (a script, the source) becomes its text followed
//! by where it is in pimigrate's source; a link to LICENSE names the
//! package's `copyright` file, which holds the license.

use anyhow::{Context, Result};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Component, Path, PathBuf};

/// Pages larger than this are installed compressed.
pub const COMPRESS_OVER: usize = 4096;

/// One installed page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Where it is in the source, relative to the repository.
    pub source: PathBuf,
    /// Its name under /usr/share/doc/pimigrate (with `.gz` when compressed).
    pub installed: PathBuf,
    /// Its text, links rewritten (to be compressed when `installed` ends
    /// in `.gz`).
    pub text: String,
}

/// README.md and the pages it reaches, from the repository at `repo`.
pub fn pages(repo: &Path) -> Result<Vec<Page>> {
    // Which pages: README.md and every .md file a link reaches.
    let mut texts: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut queue = VecDeque::from([PathBuf::from("README.md")]);
    while let Some(page) = queue.pop_front() {
        if texts.contains_key(&page) {
            continue;
        }
        let path = repo.join(&page);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for link in links(&text) {
            if let Some(target) = local_target(&page, &link.target) {
                if target.extension().is_some_and(|e| e == "md") && repo.join(&target).is_file() {
                    queue.push_back(target);
                }
            }
        }
        texts.insert(page, text);
    }
    let installed_name = |source: &Path| -> PathBuf {
        let size = texts.get(source).map_or(0, |t| t.len());
        if size > COMPRESS_OVER {
            let mut name = source.as_os_str().to_owned();
            name.push(".gz");
            PathBuf::from(name)
        } else {
            source.to_path_buf()
        }
    };
    let mut pages = Vec::new();
    for (source, text) in &texts {
        let installed = installed_name(source);
        let text = rewrite(text, |target| {
            let (path, fragment) = split_fragment(target);
            let resolved = local_target(source, path)?;
            let from = installed.parent().unwrap_or(Path::new(""));
            if texts.contains_key(&resolved) {
                let to = installed_name(&resolved);
                return Some(Rewrite::Link(format!(
                    "{}{fragment}",
                    relative(from, &to).display()
                )));
            }
            if resolved == Path::new("LICENSE") {
                return Some(Rewrite::Link(
                    relative(from, Path::new("copyright")).display().to_string(),
                ));
            }
            Some(Rewrite::Source(resolved.display().to_string()))
        });
        pages.push(Page {
            source: source.clone(),
            installed,
            text,
        });
    }
    Ok(pages)
}

/// A Markdown inline link: `[text](target)`, as byte ranges of its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    /// The whole `[text](target)`.
    start: usize,
    end: usize,
    text: String,
    target: String,
}

/// The inline links of a page, outside code spans and fenced code blocks.
/// A code span may run on over a line break, as reflowed text has it, but
/// not past the paragraph's end.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut offset = 0;
    let mut fenced = false;
    let mut in_code = false;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            in_code = false;
        }
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            found.extend(line_links(line, &mut in_code).into_iter().map(|mut l| {
                l.start += offset;
                l.end += offset;
                l
            }));
        }
        offset += line.len();
    }
    found
}

fn line_links(line: &str, in_code: &mut bool) -> Vec<Link> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => *in_code = !*in_code,
            b'[' if !*in_code => {
                // The matching `]`, allowing one level of nesting (an
                // image or code inside the text).
                let mut depth = 0;
                let mut j = i;
                while j < bytes.len() {
                    match bytes[j] {
                        b'[' => depth += 1,
                        b']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                if j + 1 < bytes.len() && bytes[j + 1] == b'(' {
                    if let Some(close) = line[j + 2..].find(')') {
                        let target = &line[j + 2..j + 2 + close];
                        if !target.contains(char::is_whitespace) {
                            found.push(Link {
                                start: i,
                                end: j + 3 + close,
                                text: line[i + 1..j].to_string(),
                                target: target.to_string(),
                            });
                            i = j + 3 + close;
                            continue;
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    found
}

enum Rewrite {
    /// The link, to this target.
    Link(String),
    /// The text alone, and where the target is in the source.
    Source(String),
}

fn rewrite(text: &str, mut change: impl FnMut(&str) -> Option<Rewrite>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for link in links(text) {
        let Some(rewrite) = change(&link.target) else {
            continue;
        };
        out.push_str(&text[last..link.start]);
        match rewrite {
            Rewrite::Link(target) => out.push_str(&format!("[{}]({target})", link.text)),
            Rewrite::Source(path) => {
                out.push_str(&format!("{} (`{path}` in pimigrate's source)", link.text))
            }
        }
        last = link.end;
    }
    out.push_str(&text[last..]);
    out
}

fn split_fragment(target: &str) -> (&str, &str) {
    match target.find('#') {
        Some(at) => (&target[..at], &target[at..]),
        None => (target, ""),
    }
}

/// A link's target as a path from the repository's top, when it is a
/// file of the repository (not a URL, not an anchor on the same page).
fn local_target(page: &Path, target: &str) -> Option<PathBuf> {
    let (path, _) = split_fragment(target);
    if path.is_empty()
        || path.contains("://")
        || path.starts_with("mailto:")
        || path.starts_with('/')
    {
        return None;
    }
    let mut out = PathBuf::new();
    for part in page
        .parent()
        .unwrap_or(Path::new(""))
        .join(path)
        .components()
    {
        match part {
            Component::Normal(p) => out.push(p),
            // Above the repository's top: not one of its files.
            Component::ParentDir if !out.pop() => return None,
            _ => {}
        }
    }
    Some(out)
}

/// `to` as seen from the directory `from` (both relative to the same top).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to_parts: Vec<_> = to.components().collect();
    let common = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to_parts[common..] {
        out.push(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_span_over_a_line_break_ends_before_the_link_after_it() {
        let text = "what drifted (`status\n--check` exits 2): [after](after.md).\n\n`open\n\n[next](next.md)\n";
        let found = links(text);
        let targets: Vec<&str> = found.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(
            targets,
            ["after.md", "next.md"],
            "a paragraph's end closes a stray code span"
        );
    }

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn readme_and_the_pages_it_reaches_are_installed_with_working_links() {
        let long = format!(
            "{}\n[back](../README.md#top) [plan](plan.md#what)\n",
            "x".repeat(5000)
        );
        let dir = repo(&[
            ("README.md", "See [sync](docs/sync.md), [the demo](scripts/demo.sh), [MIT](LICENSE), [web](https://example.org) and `[not](code.md)`.\n"),
            ("docs/sync.md", &long),
            ("docs/plan.md", "[sync](sync.md) [ansible](../examples/a.yml)\n"),
            ("docs/unlinked.md", "never reached\n"),
        ]);
        let pages = pages(dir.path()).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.installed.display().to_string())
            .collect();
        assert_eq!(names, ["README.md", "docs/plan.md", "docs/sync.md.gz"]);
        let readme = &pages[0].text;
        assert!(readme.contains("[sync](docs/sync.md.gz)"), "{readme}");
        assert!(
            readme.contains("the demo (`scripts/demo.sh` in pimigrate's source)"),
            "{readme}"
        );
        assert!(readme.contains("[MIT](copyright)"), "{readme}");
        assert!(readme.contains("[web](https://example.org)"));
        assert!(
            readme.contains("`[not](code.md)`"),
            "code spans are not links"
        );
        assert!(pages[1].text.contains("[sync](sync.md.gz)"));
        assert!(pages[1]
            .text
            .contains("ansible (`examples/a.yml` in pimigrate's source)"));
        assert!(pages[2]
            .text
            .contains("[back](../README.md#top) [plan](plan.md#what)"));
    }

    #[test]
    fn the_repository_readme_reaches_its_pages_and_every_link_resolves() {
        let pages = pages(crate::repo()).unwrap();
        assert!(pages.len() > 1, "README.md links no page");
        let installed: Vec<&Path> = pages.iter().map(|p| p.installed.as_path()).collect();
        for page in &pages {
            let dir = page.installed.parent().unwrap_or(Path::new(""));
            for link in links(&page.text) {
                let (path, _) = split_fragment(&link.target);
                if path.is_empty() || path.contains("://") {
                    continue;
                }
                let target = local_target(&page.installed, path).unwrap_or_default();
                assert!(
                    installed.contains(&target.as_path()) || target == Path::new("copyright"),
                    "{} links {} ({} from {}), which is not installed",
                    page.source.display(),
                    link.target,
                    target.display(),
                    dir.display()
                );
            }
        }
    }
}
