//! Every committed run under results/ re-renders from its raw.json alone to exactly the files
//! committed beside it: what a table says about how a run was made comes from that run's
//! record, and a change to the renderer that alters a published figure shows up here.

use std::path::Path;

use bench_runner::record::read_raw;
use bench_runner::render::write_all;

const OUTPUTS: [&str; 7] = [
    "table.md",
    "evidence.md",
    "summary.json",
    "results.csv",
    "comparisons.csv",
    "chart.svg",
    "report.html",
];

#[test]
fn every_committed_run_re_renders_byte_for_byte() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut runs = 0;
    for entry in std::fs::read_dir(&results).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_symlink() || !dir.join("raw.json").exists() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let raw = read_raw(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let out =
            std::env::temp_dir().join(format!("rxbench-rerender-{}-{name}", std::process::id()));
        write_all(&out, &raw).unwrap();
        // A calibration study's own outputs are part of its run's.
        let study = raw.settings.calibration_group.is_some();
        let extra: &[&str] = if study {
            &["calibration.md", "calibration.json"]
        } else {
            &[]
        };
        for &f in OUTPUTS.iter().chain(extra) {
            let committed = std::fs::read(dir.join(f)).unwrap_or_default();
            let now = std::fs::read(out.join(f)).unwrap();
            assert!(
                committed == now,
                "results/{name}/{f} is not what its raw.json renders to today; \
                 re-render it (bench-runner report results/{name}) if the change is meant"
            );
        }
        std::fs::remove_dir_all(&out).unwrap();
        runs += 1;
    }
    assert!(
        runs >= 1,
        "no committed run found under {}",
        results.display()
    );
}
