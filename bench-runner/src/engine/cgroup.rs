//! A container's CPU time straight from its cgroup (v1 `cpuacct.usage`, v2 `cpu.stat`) when
//! the engine is local: exact and cheap, where the stats API is neither.

use std::path::PathBuf;

use crate::model::CpuSplit;

/// Where a container's CPU time is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSource {
    /// cgroup v1 `cpuacct.usage` (nanoseconds).
    CgroupV1(PathBuf),
    /// cgroup v2 `cpu.stat`, `usage_usec`.
    CgroupV2(PathBuf),
    /// The engine's stats API (a remote engine, or a runner that cannot see the host's /proc).
    StatsApi,
}

/// The CPU counter file for container `id` from its init's `/proc/PID/cgroup` text; `None`
/// unless the cgroup path names the container (a pid seen in another host's namespace must not
/// be read as ours).
pub fn cgroup_cpu_file(proc_cgroup: &str, id: &str, root: &std::path::Path) -> Option<CpuSource> {
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if !path.contains(id) {
            continue;
        }
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "cpuacct") {
            for dir in ["cpuacct", "cpu,cpuacct", "cpuacct,cpu"] {
                let f = root.join(dir).join(rel).join("cpuacct.usage");
                if f.exists() {
                    return Some(CpuSource::CgroupV1(f));
                }
            }
        }
        if controllers.is_empty() {
            v2 = Some(CpuSource::CgroupV2(root.join(rel).join("cpu.stat")));
        }
    }
    v2
}

/// Reads a cgroup CPU counter, in nanoseconds.
pub fn read_cgroup(src: &CpuSource) -> Option<u64> {
    match src {
        CpuSource::CgroupV1(f) => std::fs::read_to_string(f).ok()?.trim().parse().ok(),
        CpuSource::CgroupV2(f) => {
            let text = std::fs::read_to_string(f).ok()?;
            Some(stat_field(&text, "usage_usec")? * 1000)
        }
        CpuSource::StatsApi => None,
    }
}

/// The value of field `name` in a v2 `cpu.stat` text (`usage_usec 4200` per line).
fn stat_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?
        .trim()
        .parse()
        .ok()
}

/// A cgroup's user and kernel time, in nanoseconds: v1's `cpuacct.usage_user` and
/// `cpuacct.usage_sys` beside `cpuacct.usage`, v2's `user_usec` and `system_usec` in
/// `cpu.stat` (none from the stats API, or where the kernel keeps neither).
pub fn read_cgroup_split(src: &CpuSource) -> Option<CpuSplit> {
    match src {
        CpuSource::CgroupV1(f) => {
            let read = |name: &str| -> Option<u64> {
                std::fs::read_to_string(f.with_file_name(name))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            };
            Some(CpuSplit {
                user_ns: read("cpuacct.usage_user")?,
                system_ns: read("cpuacct.usage_sys")?,
            })
        }
        CpuSource::CgroupV2(f) => {
            let text = std::fs::read_to_string(f).ok()?;
            Some(CpuSplit {
                user_ns: stat_field(&text, "user_usec")? * 1000,
                system_ns: stat_field(&text, "system_usec")? * 1000,
            })
        }
        CpuSource::StatsApi => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_counter_is_found_for_v1_and_v2_and_only_for_the_container() {
        let root = std::env::temp_dir().join(format!("rxbench-cgroup-{}", std::process::id()));
        let id = "0123abcd";
        let v1 = root.join("cpuacct/docker").join(id);
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("cpuacct.usage"), "123456789\n").unwrap();
        let text =
            format!("4:memory:/docker/{id}\n2:cpuacct:/docker/{id}\n1:cpu:/docker/{id}\n0::/\n");
        let src = cgroup_cpu_file(&text, id, &root).unwrap();
        assert_eq!(src, CpuSource::CgroupV1(v1.join("cpuacct.usage")));
        assert_eq!(read_cgroup(&src), Some(123_456_789));
        // Its split beside it, where the kernel keeps one.
        assert_eq!(read_cgroup_split(&src), None);
        std::fs::write(v1.join("cpuacct.usage_user"), "3000\n").unwrap();
        std::fs::write(v1.join("cpuacct.usage_sys"), "120000\n").unwrap();
        assert_eq!(
            read_cgroup_split(&src),
            Some(CpuSplit {
                user_ns: 3000,
                system_ns: 120_000
            })
        );
        // Another container's (or another host's) pid: its cgroup does not name our id.
        assert_eq!(cgroup_cpu_file("2:cpuacct:/docker/ffff\n", id, &root), None);

        let v2 = root.join("system.slice").join(format!("docker-{id}.scope"));
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("cpu.stat"), "usage_usec 4200\nuser_usec 4000\n").unwrap();
        let text = format!("0::/system.slice/docker-{id}.scope\n");
        let src = cgroup_cpu_file(&text, id, &root).unwrap();
        assert_eq!(read_cgroup(&src), Some(4_200_000));
        // `usage_usec` is not `user_usec`'s prefix match, and a missing field splits nothing.
        assert_eq!(read_cgroup_split(&src), None);
        std::fs::write(
            v2.join("cpu.stat"),
            "usage_usec 4200\nuser_usec 4000\nsystem_usec 200\n",
        )
        .unwrap();
        assert_eq!(
            read_cgroup_split(&src),
            Some(CpuSplit {
                user_ns: 4_000_000,
                system_ns: 200_000
            })
        );
        std::fs::remove_dir_all(&root).ok();
    }
}
