//! rxload's goose engine (a reqwest client per user), run as a child with `--json`: the
//! realism cross-check. Its window is the whole child run, in whole seconds, with no warm-up.

use std::path::{Path, PathBuf};

use driver::report::Report;

use super::{run_child, Load, LoadDriver, LoadError, Setup};
use crate::engine::build;

pub struct Goose {
    /// rxload built with its goose feature.
    rxload: PathBuf,
}

impl Goose {
    pub fn build(root: &Path) -> Result<Goose, LoadError> {
        Ok(Goose {
            rxload: build::rxload_with_goose(root).map_err(LoadError::GooseBuild)?,
        })
    }
}

impl LoadDriver for Goose {
    fn name(&self) -> &'static str {
        "goose"
    }

    fn drive(
        &self,
        load: &Load,
        setup: &Setup,
        edge: &mut dyn FnMut(),
    ) -> Result<Report, LoadError> {
        let mut cmd = std::process::Command::new(&self.rxload);
        cmd.args(load.wrk_args(setup))
            .args(["--engine", "goose", "--json", load.url]);
        let out = run_child("goose", &mut cmd, edge)?;
        serde_json::from_slice(&out).map_err(|e| LoadError::Report {
            name: "goose",
            detail: e.to_string(),
        })
    }
}
