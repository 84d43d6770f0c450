//! `--driver oha`: a short native run of every load model driven by the real oha (crates.io,
//! installed by .ci/run), its JSON parsed into every slice's report. Without oha the test says
//! SKIPPED — unless `RXBENCH_REQUIRE_OHA` is set (.ci/run sets it), when it fails.

mod common;

use std::process::Command;

use bench_runner::model::{LoadModel, Offered};
use common::{loopback_untracked_or_skip, run_folder};

const RUNNER: &str = env!("CARGO_BIN_EXE_bench-runner");

fn oha_here() -> bool {
    bench_runner::load::oha::Oha::find().is_ok()
}

#[test]
fn oha_drives_every_load_model_and_its_report_is_read() {
    if !oha_here() {
        assert!(
            std::env::var_os("RXBENCH_REQUIRE_OHA").is_none(),
            "RXBENCH_REQUIRE_OHA is set but oha is not installed"
        );
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED oha: oha is not installed (cargo install oha --locked)\n",
        );
        return;
    }
    let Some(_untracked) = loopback_untracked_or_skip("oha", 3961) else {
        return;
    };
    let out = std::env::temp_dir().join(format!("rxbench-oha-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let result = Command::new(RUNNER)
        .args([
            "--engine",
            "native",
            "--driver",
            "oha",
            "--profiles",
            "relaxed",
        ])
        .args(["--configs", "rx", "--instances", "1", "--conns", "16"])
        // oha drives one server at a time: no duets.
        .args(["--pairing", "alternate"])
        .args(["--load", "keepalive,per-request,open", "--open-at", "50"])
        .args(["--open-slowest", "0", "--rounds", "2", "--slice", "1s"])
        .args([
            "--slice-warmup",
            "0s",
            "--strace",
            "off",
            "--port",
            "3961",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let dir = run_folder(&out).expect("the run's folder");
    let raw = bench_runner::record::read_raw(&dir).unwrap();
    assert_eq!(raw.driver, "oha");
    let open = LoadModel::Open(Offered::Own(50));
    for load in [LoadModel::KeepAlive, LoadModel::PerRequest, open] {
        let slices: Vec<_> = raw.slices.iter().filter(|s| s.load == load).collect();
        assert_eq!(slices.len(), 2, "{load}: a slice a round");
        for s in slices {
            assert!(s.ok(), "{load}: {s:?}");
            let r = s.report.as_ref().unwrap();
            assert_eq!(r.engine, "oha");
            assert!(r.requests > 100 && r.errors.status == 0, "{load}: {r:?}");
            assert!(
                r.latency.p50_us > 0.0 && r.latency.p99_us >= r.latency.p50_us,
                "{r:?}"
            );
        }
    }
    // The open-loop slices ran after both rounds of the rest and offered half the median of
    // their keep-alive rates; oha kept to it or the slice says it fell behind (on 2 busy
    // cores oha can offer less than that).
    let first_share = raw.slices.iter().position(|s| s.load == open).unwrap();
    let keep_alive: Vec<f64> = raw.slices[..first_share]
        .iter()
        .filter(|s| s.load == LoadModel::KeepAlive)
        .filter_map(|s| s.rps())
        .collect();
    assert_eq!(
        keep_alive.len(),
        2,
        "both keep-alive rounds before any share"
    );
    let capacity = bench_runner::stats::median(&keep_alive).unwrap();
    for s in raw.slices.iter().filter(|s| s.load == open) {
        let offered = s.offered_rps().unwrap();
        assert!(
            (offered - 0.5 * capacity).abs() < 1.0,
            "{offered} vs {capacity}"
        );
        let got = s.rps().unwrap();
        assert!(got < 1.1 * offered, "oha at {got} of {offered}");
        assert_eq!(
            s.behind_schedule(),
            got < bench_runner::load::oha::ON_SCHEDULE * offered,
            "oha at {got} of {offered}"
        );
    }
    std::fs::remove_dir_all(&out).ok();
}
