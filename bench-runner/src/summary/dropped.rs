//! The rounds a run left out of a cell, and why: a slice that failed takes its round out of
//! every comparison of its server in that cell (a duet's partner loses the round too), so the
//! report names each one instead of leaving only a smaller `n` to show it.

use serde::{Deserialize, Serialize};

use crate::model::{LoadModel, Raw, ServerKey};

/// One failed slice: the round it takes out, where, and the cause's first line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DroppedRound {
    pub round: u32,
    pub server: ServerKey,
    pub load: LoadModel,
    pub conns: u32,
    pub route: String,
    /// The other server of its duet, which loses the round with it (none: a slice alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner: Option<ServerKey>,
    pub cause: String,
}

/// Every failed slice of the run, the duets' and the servers' alone, in round order.
pub(super) fn dropped_rounds(raw: &Raw) -> Vec<DroppedRound> {
    let mut out: Vec<DroppedRound> = raw
        .slices
        .iter()
        .chain(&raw.solo)
        .filter_map(|s| {
            Some(DroppedRound {
                round: s.round,
                server: s.server.clone(),
                load: s.load,
                conns: s.conns,
                route: s.route.to_string(),
                partner: s.duet.as_ref().map(|d| d.server.clone()),
                cause: s.error.as_ref()?.headline().to_string(),
            })
        })
        .collect();
    out.sort_by_key(|d| d.round);
    out
}
