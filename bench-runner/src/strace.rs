//! After the rounds: one extra slice for each chosen server under `strace -c -f`, under the
//! first load model at the first connection level and route, with no warm-up so that strace's count and the driver's
//! requests cover the same load; strace's own table is kept beside raw.json. strace slows a
//! server down, so this slice is never part of any figure.

use std::path::Path;
use std::time::Duration;

use crate::cli::StraceSlices;
use crate::engine::Engine;
use crate::load::{Load, LoadDriver, Setup};
use crate::model::{Failure, FailureKind, Raw, StraceProfile};
use crate::plan::Plan;
use crate::pool::{Pool, PoolError};
use crate::slice::{drive, SliceError};

/// Why a server has no syscall profile.
#[derive(Debug, thiserror::Error)]
pub enum StraceError {
    #[error("its process is not visible from here (a container of a remote engine)")]
    NoPid,
    #[error("running strace (apt-get install strace): {0}")]
    Spawn(std::io::Error),
    #[error("strace exited ({status}): {stderr}")]
    Exited {
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("waiting for strace: {0}")]
    Wait(std::io::Error),
    #[error("strace did not detach within 10 s")]
    NoDetach,
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error(transparent)]
    Slice(#[from] SliceError),
    #[error("strace wrote no table ({stderr}): {error}")]
    NoTable {
        stderr: String,
        error: std::io::Error,
    },
    #[error("strace's table has no rows: {0}")]
    NoRows(String),
    #[error("the server answered no request in the slice under strace (too slowed to serve)")]
    NoRequests,
}

/// The shortest slice under strace. Every syscall stops the server twice for the tracer, and
/// where a context switch is dear (a nested guest) that is milliseconds: one 300 ms slice of 64
/// connections went on their accepts and registrations and answered no request.
pub const MIN_SLICE: Duration = Duration::from_secs(2);

/// A syscall profile for every configuration `which` chooses (from its first instance), into
/// the record.
pub async fn profiles<E: Engine>(
    pool: &mut Pool<'_, E>,
    plan: &Plan,
    which: StraceSlices,
    driver: &dyn LoadDriver,
    setup: &Setup,
    dir: &Path,
    raw: &mut Raw,
) {
    let load = plan.loads[0];
    let (conns, route) = (plan.conns_of(load)[0], plan.routes[0].clone());
    for i in 0..pool.specs.len() {
        // A syscall profile is the configuration's: its first instance gives it.
        let chosen = pool.specs[i].instance == 0
            && match which {
                StraceSlices::Off => false,
                StraceSlices::Foreign => pool.specs[i].foreign.is_some(),
                StraceSlices::All => true,
            };
        if !chosen || setup.abort.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        let key = pool.specs[i].key.clone();
        eprintln!("bench-runner: {key}: one slice under strace -c -f (its syscall profile)…");
        let mut profile = StraceProfile {
            load,
            conns,
            route: route.clone(),
            ..Default::default()
        };
        if let Err(e) = profile_one(pool, i, driver, setup, dir, &mut profile).await {
            eprintln!("bench-runner: {key}: no strace profile: {e}");
            profile.error = Some(Failure::new(FailureKind::Strace, e));
        }
        raw.servers[i].strace = Some(profile);
    }
}

async fn profile_one<E: Engine>(
    pool: &mut Pool<'_, E>,
    i: usize,
    driver: &dyn LoadDriver,
    setup: &Setup,
    dir: &Path,
    profile: &mut StraceProfile,
) -> Result<(), StraceError> {
    let spec = pool.specs[i].clone();
    let engine = pool.engine;
    let server = pool
        .get_mut(i)
        .ok_or_else(|| PoolError::NotRunning(spec.key.clone()))?;
    let pid = engine.pid(&server.handle).ok_or(StraceError::NoPid)?;
    let file = dir.join(format!(
        "strace-{}-{}.txt",
        spec.key.profile.name(),
        spec.key.config.name()
    ));
    let mut strace = tokio::process::Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&file)
        .args(["-p", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(StraceError::Spawn)?;
    // strace says "Process N attached" once per thread; give it a moment, then make sure it
    // did not give up (ptrace not allowed, say).
    tokio::time::sleep(Duration::from_millis(500)).await;
    if let Some(status) = strace.try_wait().map_err(StraceError::Wait)? {
        let out = strace.wait_with_output().await.map_err(StraceError::Wait)?;
        return Err(StraceError::Exited {
            status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let url = pool.url(i, &profile.route).await?;
    let load = Load {
        url: &url,
        route: &profile.route,
        model: profile.load,
        conns: profile.conns,
        rate: None,
    };
    let setup = Setup {
        warmup: Duration::ZERO,
        slice: setup.slice.max(MIN_SLICE),
        ..setup.clone()
    };
    let window = drive(pool, i, driver, &setup, &load).await;
    if let Some(id) = strace.id() {
        // SAFETY: kill(2) on our own child, not yet reaped (we hold its handle).
        unsafe { libc::kill(id as i32, libc::SIGINT) };
    }
    let out = tokio::time::timeout(Duration::from_secs(10), strace.wait_with_output())
        .await
        .map_err(|_| StraceError::NoDetach)?
        .map_err(StraceError::Wait)?;
    let window = window?;
    let table = std::fs::read_to_string(&file).map_err(|error| StraceError::NoTable {
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        error,
    })?;
    profile.requests = window.report.requests;
    profile.calls = StraceProfile::parse_calls(&table);
    if profile.calls.is_empty() {
        return Err(StraceError::NoRows(table.trim().to_string()));
    }
    // Its calls are kept, but without a request they are no one's "per request".
    if profile.requests == 0 {
        return Err(StraceError::NoRequests);
    }
    Ok(())
}
