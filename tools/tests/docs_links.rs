//! The documentation's relative links lead somewhere: every `[text](path)` and `![alt](path)`
//! in `README.md` and `docs/*.md` whose target is not a URL (`http:`, `https:`, `mailto:`) or
//! a pure `#anchor` must name a file or directory that exists, relative to the Markdown file
//! holding the link. Where a link into a Markdown file (or into the same file) carries a
//! `#fragment`, the fragment must be the anchor GitHub makes of one of that file's headings.
//! Links inside code (fenced blocks and `inline spans`) are not links and are left alone.
//!
//! On failure the test prints every broken link with its file and line.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root (this crate is `tools/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ has a parent")
        .to_path_buf()
}

/// `README.md` and every `docs/*.md`, sorted.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("reading docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// A link's target as written, and the line it is on (1-based).
#[derive(Debug)]
struct Link {
    line: usize,
    target: String,
}

/// Removes inline code spans (`` `...` ``, any number of backticks) from a line.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let fence = "`".repeat(ticks);
        match after.find(&fence) {
            Some(end) => rest = &after[end + ticks..],
            // An unclosed span is literal backticks.
            None => {
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every inline link of `text` outside code: `[..](target)`.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            // The target ends at the parenthesis that closes the one opened by "](".
            let mut depth = 1;
            let mut end = None;
            for (j, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(j);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            let mut target = after[..end].trim();
            // `<path with spaces>` and a `"title"` after the path.
            if let Some(inner) = target.strip_prefix('<') {
                target = inner.split('>').next().unwrap_or(inner);
            } else if let Some(space) = target.find(char::is_whitespace) {
                target = &target[..space];
            }
            found.push(Link {
                line: i + 1,
                target: target.to_string(),
            });
            rest = &after[end + 1..];
        }
    }
    found
}

/// The anchor GitHub gives a heading: lowercased, spaces to hyphens, and every character that
/// is not a letter, a digit, a hyphen or an underscore dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fenced code), a repeated one numbered
/// `-1`, `-2`, ... as GitHub numbers them.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced || !trimmed.starts_with('#') {
            continue;
        }
        let level = trimmed.chars().take_while(|&c| c == '#').count();
        let Some(title) = trimmed[level..].strip_prefix(' ') else {
            continue;
        };
        let base = slug(title);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// What is wrong with `link` in the file `doc`, if anything.
fn check(doc: &Path, doc_text: &str, link: &Link) -> Option<String> {
    let t = link.target.as_str();
    let lower = t.to_ascii_lowercase();
    if t.is_empty() {
        return Some("an empty target".into());
    }
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
    {
        return None;
    }
    let (path, fragment) = match t.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (t, None),
    };
    let (file, text) = if path.is_empty() {
        (doc.to_path_buf(), Some(doc_text.to_string()))
    } else {
        let file = doc.parent().expect("a document's folder").join(path);
        if !file.exists() {
            return Some(format!("{} does not exist", file.display()));
        }
        let is_md = file.extension().is_some_and(|x| x == "md");
        (
            file.clone(),
            is_md.then(|| fs::read_to_string(&file).ok()).flatten(),
        )
    };
    match (fragment, text) {
        (Some(f), Some(text)) if !f.is_empty() && !anchors(&text).iter().any(|a| a == f) => Some(
            format!("{} has no heading with the anchor #{f}", file.display()),
        ),
        _ => None,
    }
}

#[test]
fn every_relative_link_in_the_docs_leads_somewhere() {
    let root = root();
    let mut checked = 0;
    let mut broken = Vec::new();
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        for link in links(&text) {
            checked += 1;
            if let Some(why) = check(&doc, &text, &link) {
                let name = doc.strip_prefix(&root).unwrap_or(&doc).display();
                let why = why.replace(&format!("{}/", root.display()), "");
                broken.push(format!("{name}:{}: ({}): {why}", link.line, link.target));
            }
        }
    }
    assert!(checked > 0, "no links found: is the parser broken?");
    assert!(
        broken.is_empty(),
        "{} broken link(s) of {checked}:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_parser_finds_links_and_skips_code() {
    let text = "See [a](docs/a.md#x) and ![p](perf/p.svg \"title\").\n\
                `[not](a-link)` and [b](<with space.md>)\n\
                ```\n[in](code)\n```\n[c](https://example.com) [d](#here) [e](f(1).md)\n";
    let found = links(text);
    let got: Vec<(usize, &str)> = found.iter().map(|l| (l.line, l.target.as_str())).collect();
    assert_eq!(
        got,
        [
            (1, "docs/a.md#x"),
            (1, "perf/p.svg"),
            (2, "with space.md"),
            (6, "https://example.com"),
            (6, "#here"),
            (6, "f(1).md"),
        ]
    );
}

#[test]
fn anchors_are_githubs() {
    let text = "# How softrnic is built\n## The drop-in `librdmacm.so.1`\n\
                ## rdma-core's own tests\n## A link: `testbed/relay_link.sh`\n\
                ```\n# not a heading\n```\n## Tests\n## Tests\n";
    assert_eq!(
        anchors(text),
        [
            "how-softrnic-is-built",
            "the-drop-in-librdmacmso1",
            "rdma-cores-own-tests",
            "a-link-testbedrelay_linksh",
            "tests",
            "tests-1",
        ]
    );
}
