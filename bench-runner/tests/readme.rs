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
    body[..body.find("\n\nTerms (").unwrap()].to_string()
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

/// One reference run: the run README.md answers from (its first headline block) is the one
/// `results/latest` points at and the one results/README.md marks `latest`, and every link
/// README.md gives as "the reference run" goes to it.
#[test]
fn readme_latest_and_the_results_index_name_one_reference_run() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let at = readme
        .find("<!-- headline: results/")
        .expect("README.md quotes no run's headline");
    let rest = &readme[at + "<!-- headline: results/".len()..];
    let reference = &rest[..rest.find(" -->").unwrap()];
    let latest = std::fs::read_link(root().join("results/latest")).expect("results/latest");
    assert_eq!(
        latest.to_str().unwrap(),
        reference,
        "results/latest is not the run README.md answers from"
    );
    let index = std::fs::read_to_string(root().join("results/README.md")).unwrap();
    assert!(
        index.contains(&format!("`{reference}/` (`latest`)")),
        "results/README.md does not mark {reference} as `latest`"
    );
    for (at, _) in readme.match_indices("reference run") {
        let tail = &readme[at..(at + 200).min(readme.len())];
        if let Some(link) = tail.find("](results/") {
            let run = &tail[link + "](results/".len()..];
            let Some(end) = run.find('/') else { continue };
            let run = &run[..end];
            if !root().join("results").join(run).is_dir() {
                continue; // a link to an index, not to a run
            }
            assert_eq!(
                run, reference,
                "README.md's \"reference run\" link goes to {run}"
            );
        }
    }
}

/// Every term a committed run's headline lists is defined in that run's glossary.
#[test]
fn every_term_a_headline_lists_is_in_its_glossary() {
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("results")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_symlink() {
            continue;
        }
        let Ok(table) = std::fs::read_to_string(dir.join("table.md")) else {
            continue;
        };
        let Some(at) = table.find("\nTerms ([glossary](#glossary)): ") else {
            continue;
        };
        let line = &table[at + "\nTerms ([glossary](#glossary)): ".len()..];
        let line = &line[..line.find(". The evidence").unwrap()];
        let glossary = &table[table.find("\n## Glossary\n").expect("a glossary")..];
        for term in line.split("; ") {
            assert!(
                glossary.contains(&format!("\n- **{term}**: ")),
                "{}: the headline lists {term:?}, which its glossary does not define",
                dir.display()
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "no committed run lists its headline's terms");
}
