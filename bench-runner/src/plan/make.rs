//! The arguments turned into a plan: which configurations are resident, which load models,
//! levels and routes a round visits, and every combination the arguments cannot make named.

use std::collections::{BTreeMap, BTreeSet};

use super::Plan;
use crate::cli::{Network, RunArgs};
use crate::model::{Launch, LoadModel, Pairing, Profile, Relaunch, ServerKey, Subject};

/// Arguments that make no plan, each named.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("no profile left to measure (native mode has no 'default')")]
    NoProfile,
    #[error("--network bridge needs a Docker engine (native mode has no networks)")]
    BridgeNeedsDocker,
    #[error("--server {0}: two servers of that name")]
    DuplicateServer(String),
    #[error("--server {name}=image:{image} needs a Docker engine; natively give cmd:COMMAND")]
    ImageNeedsDocker { name: String, image: String },
    #[error("--server {0}=cmd:…: commands run natively (--engine native); under Docker give image:IMAGE")]
    CmdNeedsNative(String),
    #[error("--reference {0}: no --server of that name")]
    UnknownReference(String),
    #[error("--load open needs keepalive in the same run: its offered rates are shares of the keep-alive req/s measured in the same run (e.g. --load keepalive,open), unless --open-at and --open-slowest are off and --open-rate gives them")]
    OpenNeedsKeepAlive,
    #[error("--open-conns {0}: an open-loop share of keep-alive capacity needs keep-alive measured at that level too (add it to --conns, or offer a fixed --open-rate)")]
    OpenLevelWithoutCapacity(u32),
    #[error("--pairing duet with --relaunch once: a duet's servers keep their luck (memory placement, caches) all run, and its comparison of two resident processes would count that luck as their difference; duets need --relaunch round (their default)")]
    DuetResident,
    #[error("--driver {0} cannot drive duets ({1}): only rxload drives two servers over one window; add --pairing alternate")]
    DuetNeedsRxload(&'static str, &'static str),
    #[error("--port {port}: {servers} servers need consecutive ports from it")]
    PortsRunOut { port: u16, servers: usize },
}

/// The plan from the arguments, once the engine is known (native mode has no engine default
/// profile and no networks), and notes for the reader about what was left out.
pub fn make_plan(a: &RunArgs, native: bool, seed: u64) -> Result<(Plan, Vec<String>), PlanError> {
    let mut notes = Vec::new();
    let mut profiles = Vec::new();
    for &p in &a.profiles {
        if native && p == Profile::Default {
            notes.push("native mode: no engine, so no engine default profile; 'default' was skipped (relaxed = no filter, no-io-uring = the same EPERM filter as a seccomp filter in the child)".into());
            continue;
        }
        if !profiles.contains(&p) {
            profiles.push(p);
        }
    }
    if profiles.is_empty() {
        return Err(PlanError::NoProfile);
    }
    if native && a.network == Network::Bridge {
        return Err(PlanError::BridgeNeedsDocker);
    }
    let mut names = BTreeSet::new();
    for f in &a.servers {
        if !names.insert(f.name.as_str()) {
            return Err(PlanError::DuplicateServer(f.name.clone()));
        }
        match (&f.launch, native) {
            (Launch::Image(image), true) => {
                return Err(PlanError::ImageNeedsDocker {
                    name: f.name.clone(),
                    image: image.clone(),
                })
            }
            (Launch::Cmd(_), false) => return Err(PlanError::CmdNeedsNative(f.name.clone())),
            (Launch::Image(_), false) | (Launch::Cmd(_), true) => {}
        }
    }
    if let Some(r) = a.references.iter().find(|r| !names.contains(r.as_str())) {
        return Err(PlanError::UnknownReference(r.clone()));
    }
    let mut subjects: Vec<Subject> = a.configs.iter().map(|&c| Subject::Own(c)).collect();
    subjects.extend(
        a.servers
            .iter()
            .map(|f| Subject::Foreign(f.name.as_str().into())),
    );
    let mut servers = Vec::new();
    for &profile in &profiles {
        for config in &subjects {
            let key = ServerKey {
                profile,
                config: config.clone(),
            };
            if !servers.contains(&key) {
                servers.push(key);
            }
        }
    }
    let residents = servers.len() * a.measure.instances() as usize;
    if a.network == Network::Host && usize::from(a.port) + residents > 65_536 {
        return Err(PlanError::PortsRunOut {
            port: a.port,
            servers: residents,
        });
    }
    let mut loads = a.measure.load_models();
    if a.measure.loads.is_none() && loads.iter().any(|&l| !a.driver.supports(l)) {
        loads.retain(|&l| a.driver.supports(l));
        notes.push(format!(
            "--driver {} drives keep-alive only: the other load models were left out",
            a.driver.name()
        ));
    }
    let shares = loads.iter().any(|l| l.takes_share());
    if shares && !loads.contains(&LoadModel::KeepAlive) {
        return Err(PlanError::OpenNeedsKeepAlive);
    }
    let keep_alive = a.measure.conns_of(LoadModel::KeepAlive);
    let mut load_conns = BTreeMap::new();
    for &load in &loads {
        let levels = a.measure.conns_of(load);
        if let Some(&n) = levels
            .iter()
            .find(|n| load.takes_share() && !keep_alive.contains(n))
        {
            return Err(PlanError::OpenLevelWithoutCapacity(n));
        }
        load_conns.insert(load, levels);
    }
    let (conns, load_conns) = split_levels(load_conns);
    let relaunch = a.measure.relaunch();
    let pairing = a.measure.pairing();
    if pairing == Pairing::Duet {
        if relaunch == Relaunch::Once {
            return Err(PlanError::DuetResident);
        }
        if a.driver != crate::cli::DriverChoice::Rxload {
            let asked = if a.measure.pairing.is_some() {
                "--pairing duet"
            } else {
                "a full run's default pairing"
            };
            return Err(PlanError::DuetNeedsRxload(a.driver.name(), asked));
        }
    }
    let references: Vec<Subject> = a
        .references
        .iter()
        .map(|r| Subject::Foreign(r.as_str().into()))
        .collect();
    let duets = match pairing {
        Pairing::Alternate => vec![],
        Pairing::Duet => crate::summary::comparison_pairs(&servers, &references)
            .iter()
            .filter_map(|(x, y)| {
                let at = |k| servers.iter().position(|s| s == k);
                Some((at(x)?, at(y)?))
            })
            .collect(),
    };
    let solo = match pairing {
        Pairing::Duet if !a.measure.no_solo => solo_servers(&servers, SOLO_PROFILES),
        _ => vec![],
    };
    Ok((
        Plan {
            solo,
            servers,
            loads,
            conns,
            load_conns,
            routes: a.measure.routes.clone(),
            instances: a.measure.instances(),
            relaunch,
            pairing,
            duets,
            target: a.measure.target(),
            rounds: a.measure.rounds(),
            slice: a.measure.slice(),
            warmup: a.measure.slice_warmup(),
            seed,
        },
        notes,
    ))
}

/// The profiles the seed table drives its servers alone under: no filter, and the block.
/// The engine's `default` joins them where it blocks io_uring too ([`Plan::solo_with_default`]).
pub const SOLO_PROFILES: &[Profile] = &[Profile::Relaxed, Profile::NoIoUring];

/// The seed PR's servers (epoll before and after, and io_uring) under `profiles`, as indices
/// into `servers`: those of them the run has. None unless rx is there — the table pairs every
/// cell with it.
pub(super) fn solo_servers(servers: &[ServerKey], profiles: &[Profile]) -> Vec<usize> {
    use crate::model::ServerConfig::{IoUring, Legacy, Rx};
    let at = |profile: Profile, c: crate::model::ServerConfig| {
        servers.iter().position(|k| {
            k == &ServerKey {
                profile,
                config: c.into(),
            }
        })
    };
    profiles
        .iter()
        .filter(|&&p| at(p, Rx).is_some())
        .flat_map(|&p| [Legacy, Rx, IoUring].map(|c| at(p, c)))
        .flatten()
        .collect()
}

/// Every model's levels as the plan keeps them: the run's levels (all models' together), and
/// the models measured at fewer — every model at every level is the plan of the runs before
/// levels per model, and records nothing.
pub(super) fn split_levels(
    mut by_load: BTreeMap<LoadModel, Vec<u32>>,
) -> (Vec<u32>, BTreeMap<LoadModel, Vec<u32>>) {
    let mut conns: Vec<u32> = by_load.values().flatten().copied().collect();
    conns.sort_unstable();
    conns.dedup();
    by_load.retain(|_, levels| *levels != conns);
    (conns, by_load)
}
