//! The parsers of the command line's typed values: routes, durations, foreign servers.

use std::time::Duration;

use clap::ValueEnum;
use driver::target::Route;

use crate::model::{ForeignServer, Launch, ServerConfig};

/// One of `--routes GET:/,POST:/user`.
pub(super) fn route(s: &str) -> Result<Route, String> {
    s.parse()
        .map_err(|e: driver::target::TargetError| e.to_string())
}

/// `NAME=cmd:COMMAND[,ENV=VALUE…]` or `NAME=image:IMAGE[,ENV=VALUE…]`. The environment pairs
/// are the trailing comma-separated pieces that look like `NAME=VALUE` with an upper-case
/// name, so a command may itself hold commas.
pub fn foreign_server(s: &str) -> Result<ForeignServer, String> {
    let (name, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': expected NAME=cmd:COMMAND or NAME=image:IMAGE"))?;
    let name_ok = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if !name_ok {
        return Err(format!(
            "'{name}': a server name is 1–32 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
        ));
    }
    if ServerConfig::from_str(name, true).is_ok() {
        return Err(format!(
            "'{name}' is one of this project's configurations (--configs); name the server otherwise"
        ));
    }
    let mut pieces: Vec<&str> = rest.split(',').collect();
    let is_env = |p: &str| {
        p.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
                && k.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
    };
    let mut env = Vec::new();
    while pieces.len() > 1 && is_env(pieces[pieces.len() - 1]) {
        let (k, v) = pieces
            .pop()
            .expect("checked")
            .split_once('=')
            .expect("checked");
        env.insert(0, (k.to_string(), v.to_string()));
    }
    let target = pieces.join(",");
    let launch = if let Some(cmd) = target.strip_prefix("cmd:") {
        Launch::Cmd(cmd.trim().to_string())
    } else if let Some(image) = target.strip_prefix("image:") {
        Launch::Image(image.trim().to_string())
    } else {
        return Err(format!(
            "'{target}': say how to start {name}: cmd:COMMAND (native) or image:IMAGE (Docker)"
        ));
    };
    if matches!(&launch, Launch::Cmd(c) | Launch::Image(c) if c.is_empty()) {
        return Err(format!("{name}: the command or image is empty"));
    }
    Ok(ForeignServer {
        name: name.to_string(),
        launch,
        env,
    })
}

/// `2` or `2%`: a percentage above 0 and at most 50.
pub(super) fn percent(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("{s}: a percentage, e.g. 2 or 2%"))?;
    if !(p > 0.0 && p <= 50.0) {
        return Err(format!("{s}: a resolution between 0 and 50 %"));
    }
    Ok(p)
}

pub(super) fn duration(s: &str) -> Result<Duration, String> {
    let d = driver::target::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(100) {
        return Err(format!(
            "{s}: a slice shorter than 100 ms measures start-up, not serving"
        ));
    }
    Ok(d)
}

pub(super) fn duration_or_zero(s: &str) -> Result<Duration, String> {
    if s.trim_end_matches(['s', 'm']).trim() == "0" {
        return Ok(Duration::ZERO);
    }
    driver::target::parse_duration(s).map_err(|e| e.to_string())
}
