//! Real wrk (Debian's), its text report parsed: the cross-check. Its window is the whole
//! child run, in whole seconds, with no warm-up.

use driver::report::Report;
use driver::target::Route;

use super::{run_child, Load, LoadDriver, LoadError, Setup};

pub struct Wrk;

impl Wrk {
    /// wrk, if installed; it sends GET only (without a Lua script), so other routes are refused.
    pub fn find(routes: &[Route]) -> Result<Wrk, LoadError> {
        if let Some(r) = routes.iter().find(|r| r.method != "GET") {
            return Err(LoadError::WrkGetOnly(r.clone()));
        }
        if std::process::Command::new("wrk")
            .arg("-v")
            .output()
            .is_err()
        {
            return Err(LoadError::WrkMissing);
        }
        Ok(Wrk)
    }
}

impl LoadDriver for Wrk {
    fn name(&self) -> &'static str {
        "wrk"
    }

    fn drive(
        &self,
        load: &Load,
        setup: &Setup,
        edge: &mut dyn FnMut(),
    ) -> Result<Report, LoadError> {
        let mut cmd = std::process::Command::new("wrk");
        cmd.args(load.wrk_args(setup)).args(["--latency", load.url]);
        let out = run_child("wrk", &mut cmd, edge)?;
        driver::report::parse_wrk_text(&String::from_utf8_lossy(&out)).map_err(|e| {
            LoadError::Report {
                name: "wrk",
                detail: e.to_string(),
            }
        })
    }
}
