//! scripts/scale-run.sh is the command a machine with more cores runs (issue: the seed PR's
//! table at its own scale): here, at the size two cores allow, its plan for one worker, the
//! worker counts it leaves out and why, and the scale table it writes from the runs' summaries.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn the_scale_script_plans_every_worker_count_that_fits_and_leaves_out_the_rest() {
    let runner = Path::new(env!("CARGO_BIN_EXE_bench-runner"));
    let out = std::env::temp_dir().join(format!("rxbench-scale-{}", std::process::id()));
    let run = Command::new(root().join("scripts/scale-run.sh"))
        .args(["--dry-run", "--workers", "1,2,4,8", "--bin"])
        .arg(runner.parent().unwrap())
        .arg(&out)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&run.stdout).to_string() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{text}");
    let cores = std::thread::available_parallelism().unwrap().get();
    for n in [1usize, 2, 4, 8] {
        let planned = text.contains(&format!("== {n} worker(s): servers on "));
        assert_eq!(
            planned,
            2 * n <= cores,
            "{n} workers on {cores} CPUs:\n{text}"
        );
        if 2 * n > cores {
            assert!(
                text.contains(&format!("{n} workers need {} CPUs", 2 * n)),
                "{text}"
            );
        }
    }
    // The one-worker plan is the matrix the issue names: 4 configurations x 2 profiles x 2
    // instances, kept alive at three levels and a connection per request at one.
    assert!(
        text.contains("plan: 8 configurations x 2 instances = 16 resident servers x 4 (load model, level) pairs (keepalive at 64,256,512 conns; per-request at 64 conns)"),
        "{text}"
    );
    assert!(text.contains("servers on 0, driver on 1"), "{text}");
    let machine = std::fs::read_to_string(out.join("machine.txt")).unwrap();
    assert!(
        machine.contains("cpu:") && machine.contains("worker counts: 1"),
        "{machine}"
    );
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn the_scale_table_reads_each_worker_counts_summary() {
    if Command::new("python3").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("RXBENCH_REQUIRE_DOCKER").is_none(),
            "python3 is missing where CI requires every test to run"
        );
        let line =
            "SKIPPED the_scale_table_reads_each_worker_counts_summary: python3 is not installed\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }
    // A committed run stands in for the one-worker run of a scale folder.
    let summary = root().join("results/20261203T192538Z/summary.json");
    let out = std::env::temp_dir().join(format!("rxbench-scale-table-{}", std::process::id()));
    let run_dir = out.join("workers-1/20261203T192538Z");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::copy(&summary, run_dir.join("summary.json")).unwrap();
    let table = Command::new("python3")
        .arg(root().join("scripts/scale-table.py"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let md = std::fs::read_to_string(out.join("scale.md")).unwrap();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| 1 |")).collect();
    assert_eq!(
        rows.len(),
        4,
        "three keep-alive levels and one per-request:\n{md}"
    );
    // The block's cost on the io_uring server at 64 kept alive, as that run's summary has it.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["config"] == "io_uring"
                && c["profile"] == "no-io-uring"
                && c["baseline_profile"] == "relaxed"
                && c["load"] == "keepalive"
                && c["conns"] == 64
                && c["metric"] == "cpu_per_request"
        })
        .unwrap();
    let pct = format!(
        "{:+.1} %",
        (c["ratio_median"].as_f64().unwrap() - 1.0) * 100.0
    )
    .replace('-', "−");
    assert!(rows[0].contains(&pct), "{pct} in {}", rows[0]);
    std::fs::remove_dir_all(&out).ok();
}
