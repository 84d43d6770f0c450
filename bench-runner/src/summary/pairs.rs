//! Which servers a run compares with which: the seed PR's before/after pairs, ours against
//! each foreign server, references against the other foreign servers, each profile against
//! `relaxed`.

use crate::model::{Profile, ServerKey, Subject};

/// Every comparison the table shows: the seed PR's before/after pairs within a profile; each
/// of this project's configurations, and each `references` server, against each (other)
/// foreign server under the same profile; and each profile against `relaxed` for the same
/// server (what the filter itself costs).
pub fn comparison_pairs(
    servers: &[ServerKey],
    references: &[Subject],
) -> Vec<(ServerKey, ServerKey)> {
    let mut pairs = Vec::new();
    let mut add = |a: &ServerKey, b: ServerKey| {
        if servers.contains(&b) {
            pairs.push((a.clone(), b));
        }
    };
    for a in servers {
        if let Some(base) = a.config.baseline() {
            add(
                a,
                ServerKey {
                    profile: a.profile,
                    config: base,
                },
            );
        }
    }
    let subject = |k: &&ServerKey| k.config.own().is_some() || references.contains(&k.config);
    for a in servers.iter().filter(subject) {
        for b in servers.iter().filter(|k| k.config.own().is_none()) {
            // A reference is the subject against the others, not the baseline of another.
            let both_references = references.contains(&a.config) && references.contains(&b.config);
            if b.profile == a.profile && b.config != a.config && !both_references {
                add(a, b.clone());
            }
        }
    }
    for a in servers.iter().filter(|k| k.profile != Profile::Relaxed) {
        add(
            a,
            ServerKey {
                profile: Profile::Relaxed,
                config: a.config.clone(),
            },
        );
    }
    pairs
}
