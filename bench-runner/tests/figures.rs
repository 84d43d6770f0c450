//! Every interval README.md, docs/*.md and results/README.md quote comes from a committed run:
//! a paired change with its interval (`+5.0 % [+3.2, +6.9]`), an unresolved one
//! (`≈ [−1.3, +1.5]`) or the mechanism probe's prediction (`+4.4 % (+2.1 to +4.8)`) must be printed, character for character, by a run named in the same
//! section (heading to heading) — in its table.md, evidence.md, README.md or calibration.md,
//! which the re-render test keeps equal to what its raw.json renders today. A figure that
//! drifted from its run, or one whose run is not named where it is quoted, fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

/// The documents whose figures cite runs.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.push(root.join("results/README.md"));
    docs.push(root.join("README.md"));
    docs
}

/// Run folder names in `text`: `[label-]YYYYMMDDTHHMMSSZ` whose folder exists in results/.
fn runs_named(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i + 16 <= bytes.len() {
        let stamp = &bytes[i..i + 16];
        let is_stamp = stamp[..8].iter().all(u8::is_ascii_digit)
            && stamp[8] == b'T'
            && stamp[9..15].iter().all(u8::is_ascii_digit)
            && stamp[15] == b'Z';
        if !is_stamp || (i > 0 && bytes[i - 1].is_ascii_digit()) {
            i += 1;
            continue;
        }
        // A label before it: lower-case words joined by dashes (`peers-`, `method-once-`);
        // the longest that names a folder.
        let mut j = i;
        while j > 0 && (bytes[j - 1].is_ascii_lowercase() || bytes[j - 1] == b'-') {
            j -= 1;
        }
        let named = (j..=i)
            .filter(|&s| {
                s == i || (bytes[s].is_ascii_lowercase() && (s == j || bytes[s - 1] == b'-'))
            })
            .map(|s| &text[s..i + 16])
            .find(|name| root().join("results").join(name).is_dir());
        runs.extend(named.map(str::to_string));
        i += 16;
    }
    runs.sort();
    runs.dedup();
    runs
}

/// A signed figure with one decimal: `+5.0`, `−12.1` (U+2212), `-0.4`.
fn signed(s: &str) -> Option<usize> {
    let mut chars = s.char_indices();
    let (_, sign) = chars.next()?;
    if !matches!(sign, '+' | '−' | '-') {
        return None;
    }
    let rest = &s[sign.len_utf8()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.as_bytes().get(digits) != Some(&b'.') {
        return None;
    }
    let decimals = rest[digits + 1..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    (decimals > 0).then_some(sign.len_utf8() + digits + 1 + decimals)
}

/// The interval figures of `text`: `±x.x % [a, b]` and `≈ [a, b]` (a measured change), and
/// `±x.x % (a to b)` (the mechanism probe's prediction: its median and its windows' range), as
/// written.
fn intervals(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (open, between, close) in [('[', ", ", ']'), ('(', " to ", ')')] {
        for (at, _) in text.match_indices(open) {
            // The bracket: `[a, b]` or `(a to b)`.
            let inner = &text[at + 1..];
            let Some(a) = signed(inner) else { continue };
            let Some(after_a) = inner[a..].strip_prefix(between) else {
                continue;
            };
            let Some(b) = signed(after_a) else { continue };
            if !after_a[b..].starts_with(close) {
                continue;
            }
            let end = at + 1 + a + between.len() + b + 1;
            // What stands before it: `≈ ` (measured only) or a signed percentage `+x.x % `.
            let before = &text[..at];
            let start = if open == '[' && before.ends_with("≈ ") {
                at - "≈ ".len()
            } else if let Some(head) = before.strip_suffix(" % ") {
                let Some(s) = head.rfind(['+', '−', '-']) else {
                    continue;
                };
                if signed(&head[s..]) != Some(head.len() - s) {
                    continue;
                }
                s
            } else {
                continue;
            };
            found.push((start, text[start..end].to_string()));
        }
    }
    found.sort();
    found.into_iter().map(|(_, f)| f).collect()
}

/// What a run prints: its rendered tables and its own README.
fn printed(run: &str, cache: &mut BTreeMap<String, String>) -> String {
    cache
        .entry(run.to_string())
        .or_insert_with(|| {
            let dir = root().join("results").join(run);
            ["table.md", "evidence.md", "README.md", "calibration.md"]
                .iter()
                .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .clone()
}

/// Sections: the text from one Markdown heading to the next.
fn sections(doc: &str) -> Vec<&str> {
    let mut starts = vec![0];
    let mut at = 0;
    for line in doc.split_inclusive('\n') {
        if line.starts_with('#') && at > 0 {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(doc.len());
    starts.windows(2).map(|w| &doc[w[0]..w[1]]).collect()
}

#[test]
fn every_quoted_interval_is_printed_by_a_run_named_beside_it() {
    let mut cache = BTreeMap::new();
    let (mut checked, mut wrong) = (0, Vec::new());
    for path in documents() {
        let doc = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        for section in sections(&doc) {
            // A figure may wrap: compare with line breaks as spaces, as Markdown reads them.
            let flat = section.replace('\n', " ");
            let runs = runs_named(section);
            for figure in intervals(&flat) {
                checked += 1;
                let from = runs
                    .iter()
                    .find(|r| printed(r, &mut cache).replace('\n', " ").contains(&figure));
                if from.is_none() {
                    let heading = section.lines().next().unwrap_or("");
                    wrong.push(format!(
                        "{name}, section \"{heading}\": {figure} is printed by none of the runs it names ({})",
                        if runs.is_empty() { "none".to_string() } else { runs.join(", ") }
                    ));
                }
            }
        }
    }
    eprintln!("{checked} interval figures checked");
    assert!(
        checked >= 50,
        "only {checked} figures found: is the parser broken?"
    );
    assert!(
        wrong.is_empty(),
        "{} of {checked}:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_parser_reads_what_the_documents_write() {
    assert_eq!(
        intervals("paired +5.0 % [+3.2, +6.9] · −12.1 % [−16.6, −7.3]; ≈ [−1.3, +1.5] and [a, b]; predicted +4.4 % (+2.1 to +4.8), not ≈ (+1.0 to +2.0)"),
        [
            "+5.0 % [+3.2, +6.9]",
            "−12.1 % [−16.6, −7.3]",
            "≈ [−1.3, +1.5]",
            "+4.4 % (+2.1 to +4.8)"
        ]
    );
    assert!(intervals("+5 % [+3, +6] and [+3.2, +6.9] alone").is_empty());
    assert_eq!(
        runs_named("results/20261204T150915Z and peers-20261202T190214Z, not 20261399T000000Z"),
        ["20261204T150915Z", "peers-20261202T190214Z"]
    );
    assert_eq!(sections("# a\nx\n## b\ny\n").len(), 2);
}
