//! The-benchmarker's figure: the mean over the routes, per round (so it pairs like any other
//! series) and per row.

use std::collections::BTreeMap;

use super::{ByInstance, CellKey, Metric, RouteMean, Row, MEAN_ROUTE};
use crate::model::{LoadModel, Profile, ServerKey, Subject};
use crate::stats::instances::Series;

/// Adds the per-round mean over the routes (rounds where every route measured) as the
/// [`MEAN_ROUTE`] series of each server, instance and level.
pub(super) fn add_route_means(
    series: &mut BTreeMap<(CellKey, Metric), ByInstance>,
    routes: &[String],
) {
    let mut means: BTreeMap<(CellKey, Metric), ByInstance> = BTreeMap::new();
    let keys: std::collections::BTreeSet<(ServerKey, LoadModel, u32, Metric)> = series
        .keys()
        .map(|((k, l, c, _), m)| (k.clone(), *l, *c, *m))
        .collect();
    for (key, load, conns, metric) in keys {
        let per_route: Vec<&ByInstance> = routes
            .iter()
            .filter_map(|r| series.get(&((key.clone(), load, conns, r.clone()), metric)))
            .collect();
        if per_route.len() != routes.len() {
            continue;
        }
        let mut by_instance = ByInstance::new();
        for instance in per_route[0].keys() {
            let Some(per_route): Option<Vec<&Series>> =
                per_route.iter().map(|by| by.get(instance)).collect()
            else {
                continue;
            };
            let rounds = per_route[0]
                .keys()
                .filter(|r| per_route.iter().all(|s| s.contains_key(r)));
            let out: Series = rounds
                .map(|r| {
                    (
                        *r,
                        per_route.iter().map(|s| s[r]).sum::<f64>() / routes.len() as f64,
                    )
                })
                .collect();
            by_instance.insert(*instance, out);
        }
        means.insert(((key, load, conns, MEAN_ROUTE.into()), metric), by_instance);
    }
    series.extend(means);
}

pub(super) fn route_means(rows: &[Row], routes: &[String]) -> Vec<RouteMean> {
    if routes.len() < 2 {
        return vec![];
    }
    let mut sums: BTreeMap<(Profile, Subject, LoadModel, u32), Vec<f64>> = BTreeMap::new();
    for r in rows {
        sums.entry((r.profile, r.config.clone(), r.load, r.conns))
            .or_default()
            .push(r.rps_median);
    }
    sums.into_iter()
        .filter(|(_, v)| v.len() == routes.len())
        .map(|((profile, config, load, conns), v)| RouteMean {
            profile,
            config,
            load,
            conns,
            rps_mean: v.iter().sum::<f64>() / v.len() as f64,
        })
        .collect()
}
