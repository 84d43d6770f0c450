//! What a run keeps on disk: raw.json written atomically after every slice (a reader, or a
//! run killed mid-write, never sees half a file), the `latest` link, the commit the runner was
//! built from, the machine it ran on — and re-rendering a run from its raw.json alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::file::{self, FileError};
use crate::model::{Machine, Raw, SCHEMA};
use crate::render;

/// Why a run's record could not be written or read back.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{}: not JSON: {source}", path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{}/raw.json is not a schema-{SCHEMA} run (the slice method); runs made before it \
         (one fresh server per measurement) re-render with the bench-runner of their commit",
        .0.display()
    )]
    OtherSchema(PathBuf),
    #[error("{}: does not match the schema: {source}", path.display())]
    Schema {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("rendering {}: {source}", path.display())]
    Render {
        path: PathBuf,
        source: render::RenderError,
    },
}

/// Writes `dir/raw.json` atomically: a temporary file renamed over it.
pub fn write_raw(dir: &Path, raw: &Raw) -> Result<(), RecordError> {
    let tmp = dir.join("raw.json.tmp");
    let bytes = serde_json::to_vec(raw).map_err(|source| RecordError::NotJson {
        path: tmp.clone(),
        source,
    })?;
    std::fs::write(&tmp, bytes).map_err(file::error("writing", &tmp))?;
    std::fs::rename(&tmp, dir.join("raw.json")).map_err(file::error("renaming", &tmp))?;
    Ok(())
}

/// Reads `dir/raw.json`, refusing other schemas by name.
pub fn read_raw(dir: &Path) -> Result<Raw, RecordError> {
    let path = dir.join("raw.json");
    let text = std::fs::read_to_string(&path).map_err(file::error("reading", &path))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| RecordError::NotJson {
            path: path.clone(),
            source,
        })?;
    if value["schema"].as_u64() != Some(u64::from(SCHEMA)) {
        return Err(RecordError::OtherSchema(dir.to_path_buf()));
    }
    serde_json::from_value(value).map_err(|source| RecordError::Schema { path, source })
}

/// `bench-runner report DIR`: every output re-rendered from raw.json; prints the table.
pub fn rerender(dir: &Path) -> Result<(), RecordError> {
    let raw = read_raw(dir)?;
    render::write_all(dir, &raw).map_err(|source| RecordError::Render {
        path: dir.to_path_buf(),
        source,
    })?;
    let table = dir.join("table.md");
    print!(
        "{}",
        std::fs::read_to_string(&table).map_err(file::error("reading", &table))?
    );
    Ok(())
}

/// `OUT/<link>` -> the run's folder; anything there that is not a symlink is left alone.
pub fn point_latest_at(out: &Path, link: &str, run: &str) {
    let latest = out.join(link);
    if let Ok(m) = std::fs::symlink_metadata(&latest) {
        if !m.file_type().is_symlink() {
            eprintln!(
                "bench-runner: {} is not a symlink; left as it is",
                latest.display()
            );
            return;
        }
        let _ = std::fs::remove_file(&latest);
    }
    if let Err(e) = std::os::unix::fs::symlink(run, &latest) {
        eprintln!(
            "bench-runner: could not point {} at {run}: {e}",
            latest.display()
        );
    }
}

/// The workspace's commit, `+dirty` when files differ from it (`None` outside a git checkout).
pub fn commit() -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(crate::repo_root())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}+dirty") } else { head })
}

/// This machine, as the record describes it.
pub fn machine_here() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let cpu_id = match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => Some(format!("family {f} model {m}")),
        _ => None,
    };
    Machine {
        cpu_model,
        cpu_id,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel,
        virtualization: Some(virtualization(&cpuinfo)),
        mitigations: mitigations(Path::new("/sys/devices/system/cpu/vulnerabilities")),
    }
}

/// What the CPU flags and lscpu say about a hypervisor.
fn virtualization(cpuinfo: &str) -> String {
    let flagged = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    if !flagged {
        return "bare metal (no hypervisor flag)".into();
    }
    let vendor = std::process::Command::new("lscpu")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout).lines().find_map(|l| {
                l.strip_prefix("Hypervisor vendor:")
                    .map(|v| v.trim().to_string())
            })
        });
    match vendor {
        Some(v) => format!("{v} guest"),
        None => "a virtual machine (hypervisor flag; vendor unknown)".into(),
    }
}

/// Every vulnerability file under `dir` whose text is not "Not affected", by name.
pub fn mitigations(dir: &Path) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            let text = text.trim();
            (text != "Not affected").then(|| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    text.to_string(),
                )
            })
        })
        .collect()
}

/// `20261201T092233Z`, the run's folder name.
pub fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamp_shape() {
        let s = utc_stamp();
        assert_eq!(s.len(), 16);
        assert!(s.starts_with("20") && s.ends_with('Z') && s.as_bytes()[8] == b'T');
    }

    #[test]
    fn the_machine_names_its_mitigations_and_hypervisor() {
        let dir = std::env::temp_dir().join(format!("rxbench-vuln-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("meltdown"), "Not affected\n").unwrap();
        std::fs::write(
            dir.join("spectre_v2"),
            "Mitigation: Retpolines; STIBP: disabled\n",
        )
        .unwrap();
        let m = mitigations(&dir);
        assert_eq!(
            m,
            [(
                "spectre_v2".to_string(),
                "Mitigation: Retpolines; STIBP: disabled".to_string()
            )]
            .into()
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            mitigations(&dir).is_empty(),
            "no such folder: nothing claimed"
        );
        assert_eq!(
            virtualization("flags\t: fpu vme sse2\n"),
            "bare metal (no hypervisor flag)"
        );
        let machine = Machine {
            virtualization: Some("KVM guest".into()),
            mitigations: m,
            ..Machine::default()
        };
        assert_eq!(
            machine.cost_factors(),
            "KVM guest; mitigations: spectre_v2: Mitigation: Retpolines; STIBP: disabled"
        );
        assert_eq!(
            Machine::default().cost_factors(),
            "",
            "runs before they were recorded"
        );
    }

    #[test]
    fn another_schema_and_a_broken_file_are_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("rxbench-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("raw.json"), r#"{"schema": 1}"#).unwrap();
        let e = read_raw(&dir).unwrap_err();
        assert!(matches!(e, RecordError::OtherSchema(_)), "{e}");
        assert!(e.to_string().contains("not a schema-2 run"), "{e}");
        std::fs::write(dir.join("raw.json"), "{").unwrap();
        assert!(matches!(read_raw(&dir), Err(RecordError::NotJson { .. })));
        std::fs::write(dir.join("raw.json"), r#"{"schema": 2}"#).unwrap();
        assert!(matches!(read_raw(&dir), Err(RecordError::Schema { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(read_raw(&dir), Err(RecordError::Io(_))));
    }
}
