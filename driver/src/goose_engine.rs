//! `rxload --engine goose`: the route mix as a goose scenario, one goose user (one reqwest
//! client, so one keep-alive connection) per `-c` connection, reported in rxload's schema.
//!
//! goose is the realism cross-check, not the saturating driver: a tokio + reqwest client costs
//! several times rxload's CPU per request (see docs/methodology.md).

use std::sync::Arc;

use goose::config::GooseConfiguration;
use goose::prelude::*;

use crate::report::{Errors, RateStats, Report};
use crate::{cpu_seconds, latency_stats, load::new_histogram, Options, RunError};

/// One transaction per route, run in order by every user: the same round-robin as rxload's.
fn transaction(method: String, path: String, body: Arc<Vec<u8>>) -> Transaction {
    let name = format!("{method} {path}");
    Transaction::new(Arc::new(move |user: &mut GooseUser| {
        let (method, path, body) = (method.clone(), path.clone(), body.clone());
        Box::pin(async move {
            match method.as_str() {
                "POST" => {
                    user.post(&path, body.as_ref().clone()).await?;
                }
                _ => {
                    user.get(&path).await?;
                }
            }
            Ok(())
        })
    }))
    .set_name(&name)
}

pub fn run(opts: &Options) -> Result<Report, RunError> {
    let engine = |e: String| RunError::Engine(format!("goose: {e}"));
    let secs = opts.duration.as_secs().max(1);
    let host = format!("http://{}", opts.url.authority);
    let mut config = GooseConfiguration::default();
    config.host = Some(host);
    config.users = Some(opts.connections);
    // Start every user within about a tenth of a second; metrics are reset once all run.
    config.increase_rate = Some((opts.connections * 10).max(1).to_string());
    config.run_time = Some(format!("{secs}s"));
    config.timeout = Some(opts.timeout.as_secs_f64().to_string());
    config.quiet = 1;
    config.no_print_metrics = true;
    config.no_error_summary = true;

    let body = Arc::new(opts.body.clone());
    let mut scenario = Scenario::new("contract");
    for r in &opts.routes {
        scenario = scenario.register_transaction(transaction(
            r.method.clone(),
            r.path.clone(),
            body.clone(),
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| engine(e.to_string()))?;
    let cpu0 = cpu_seconds();
    let metrics = runtime
        .block_on(async {
            GooseAttack::initialize_with_config(config)?
                .register_scenario(scenario)
                .execute()
                .await
        })
        .map_err(|e| engine(format!("{e:?}")))?;
    let cpu = cpu_seconds() - cpu0;

    let mut histogram = new_histogram();
    let mut errors = Errors::default();
    let mut requests = 0u64;
    for agg in metrics.requests.values() {
        requests += agg.raw_data.counter as u64;
        for (&bucket_us, &count) in agg.raw_data.times_us.iter() {
            let _ = histogram.record_n(bucket_us.max(1), count as u64);
        }
        for (&code, &count) in &agg.status_code_counts {
            match code {
                0 => errors.read += count as u64, // no response at all
                200..=399 => {}
                _ => errors.status += count as u64,
            }
        }
    }
    let elapsed = (metrics.duration as f64).max(1e-9);
    let rps = requests as f64 / elapsed;
    Ok(Report {
        url: opts.url.text.clone(),
        engine: "goose".into(),
        threads: opts.threads as u64,
        connections: opts.connections as u64,
        duration_s: opts.duration.as_secs_f64(),
        requests,
        elapsed_s: elapsed,
        bytes_read: 0, // goose does not count response bytes
        requests_per_s: rps,
        transfer_per_s: 0.0,
        // goose keeps response times in buckets (within 1 %); latency is per request, from
        // reqwest's send to its complete response.
        latency: latency_stats(&histogram),
        req_per_thread: RateStats {
            mean: rps / opts.threads.max(1) as f64,
            ..RateStats::default()
        },
        errors,
        reconnects: None,
        closes: None,
        open_loop: None,
        io_uring: None,
        // The whole attack's CPU, ramp-up and teardown included: an upper bound for the
        // measured window.
        driver_cpu_s: Some(cpu),
        driver_syscalls: None,
        latency_buckets: None,
    })
}
