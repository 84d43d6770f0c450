//! Every environment knob the code reads is documented in docs/runtime-config.md, and every
//! knob documented there is still read somewhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Quoted `APP_*` / `RXBENCH_*` names in `text` (how the code spells a knob it reads).
fn quoted_knobs(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for prefix in ["\"APP_", "\"RXBENCH_"] {
        for (i, _) in text.match_indices(prefix) {
            let rest = &text[i + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            if rest[end..].starts_with('"') && end > prefix.len() {
                found.insert(rest[..end].to_string());
            }
        }
    }
    found
}

#[test]
fn every_knob_read_is_documented_and_every_documented_knob_is_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = std::fs::read_to_string(root.join("docs/runtime-config.md")).unwrap();
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let this_file = Path::new(file!()).file_name().unwrap();
    // `read`: knobs the programs read (non-test code); `mentioned`: anywhere, tests too
    // (a test harness knob such as RXBENCH_REQUIRE_DOCKER is read by a test).
    let (mut read, mut mentioned) = (BTreeSet::new(), BTreeSet::new());
    for f in files.iter().filter(|f| f.file_name() != Some(this_file)) {
        let text = std::fs::read_to_string(f).unwrap();
        mentioned.extend(quoted_knobs(&text));
        // Test code sets knobs to exercise them; only non-test code counts as reading them.
        let code = text.split("#[cfg(test)]").next().unwrap();
        if !f.components().any(|c| c.as_os_str() == "tests") {
            read.extend(quoted_knobs(code));
        }
    }
    assert!(
        read.contains("APP_BACKEND"),
        "the scan found nothing: {read:?}"
    );
    for knob in &read {
        assert!(
            doc.contains(&format!("`{knob}`")),
            "{knob} is read in code but missing from docs/runtime-config.md"
        );
    }
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|k| k.starts_with("APP_") || k.starts_with("RXBENCH_"))
        .map(String::from)
        .collect();
    for knob in &documented {
        assert!(
            mentioned.contains(knob),
            "{knob} is documented but no code reads it"
        );
    }
}
