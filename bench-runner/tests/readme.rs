//! README.md is the front door: at most ~150 lines, the two commands, and its answer generated
//! from committed runs — every block between `<!-- headline: results/RUN -->` and
//! `<!-- /headline -->` is exactly the headline that run's table.md opens with (which the
//! re-render test keeps equal to what its raw.json renders today), and every line marked
//! `<!-- from: results/RUN -->` is a line of that run's headline. A renderer change that moves a
//! quoted figure fails here until README.md is regenerated from the run.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The headline's bullets in a run's table.md (between its title and the "Terms" line).
fn headline_of(run: &str) -> String {
    let table = std::fs::read_to_string(root().join(run).join("table.md"))
        .unwrap_or_else(|e| panic!("{run}/table.md: {e}"));
    let start = table
        .find("## What Docker's io_uring block costs here\n\n")
        .unwrap_or_else(|| panic!("{run}/table.md has no headline"));
    let body = &table[start..];
    let body = &body[body.find("\n\n").unwrap() + 2..];
    body[..body.find("\n\nTerms:").unwrap()].to_string()
}

#[test]
fn the_readme_answers_first_from_committed_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 160,
        "README.md has {lines} lines: the front door is ~150"
    );
    for command in [
        "cargo run --release -p bench-runner",
        "cargo test --workspace",
    ] {
        assert!(
            readme.contains(&format!("```sh\n{command}\n```")),
            "{command}"
        );
    }
    let mut blocks = 0;
    for (at, _) in readme.match_indices("<!-- headline: ") {
        let rest = &readme[at + "<!-- headline: ".len()..];
        let run = &rest[..rest.find(" -->").unwrap()];
        let body = &rest[rest.find("-->\n").unwrap() + 4..];
        let body = &body[..body
            .find("\n<!-- /headline -->")
            .expect("an unclosed headline block")];
        assert_eq!(
            body,
            headline_of(run),
            "README.md's headline of {run} is not what that run's table.md says"
        );
        blocks += 1;
    }
    assert!(blocks >= 1, "README.md quotes no run's headline");
    // A line marked `<!-- from: results/RUN -->` quotes a line of RUN's headline verbatim.
    let mut quoted = 0;
    for line in readme.lines().filter(|l| l.contains("<!-- from: ")) {
        let (text, marker) = line.split_once(" <!-- from: ").unwrap();
        let run = marker.trim_end_matches(" -->");
        let headline = headline_of(run);
        assert!(
            headline.lines().any(|l| l.trim() == text.trim()),
            "README.md quotes a line {run}'s headline does not have:\n{text}\n--- its headline:\n{headline}"
        );
        quoted += 1;
    }
    assert!(quoted >= 2, "README.md explains no host from a run");
    // The answer is on the first screen: the first headline block starts within 30 lines.
    let first = readme
        .lines()
        .position(|l| l.starts_with("<!-- headline: "))
        .unwrap();
    assert!(first < 30, "the answer starts at line {first}");
}
