//! The native mechanism: each resident server is a child process, pinned with
//! `sched_setaffinity` before exec; `no-io-uring` is a seccomp filter installed in the child.
//! Its CPU time is the process's CPU clock (`clock_getcpuclockid`), in nanoseconds. A foreign
//! server's command runs as `sh -c 'exec COMMAND'` in a process group of its own, so its
//! server is the child itself (its clock is the server's) and a stop reaches anything it
//! started.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use super::error::{EngineError, Result};
use super::{Engine, Lines, ServerSpec, Signal};
use crate::cli::Network;
use crate::model::{Launch, Profile};

#[derive(Default)]
pub struct Native {
    /// The server binary, once [`Engine::prepare`] built it.
    pub server: PathBuf,
}

pub struct Process {
    child: Mutex<Child>,
    pid: libc::pid_t,
    /// Signals go to the whole process group (a foreign server's command).
    group: bool,
}

impl Native {
    fn start(&self, spec: &ServerSpec, lines: &Lines) -> Result<Process> {
        let (mut cmd, what) = match spec.foreign.as_ref().map(|f| &f.launch) {
            None => (
                Command::new(&self.server),
                self.server.display().to_string(),
            ),
            Some(Launch::Cmd(line)) => {
                let line = line.replace("{port}", &spec.port.to_string());
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("exec {line}")).process_group(0);
                (c, line)
            }
            Some(Launch::Image(image)) => {
                return Err(EngineError::ImageNatively {
                    key: spec.key.clone(),
                    image: image.clone(),
                })
            }
        };
        cmd.envs(spec.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if spec.key.profile == Profile::NoIoUring {
            sandbox::deny_io_uring_in_child(&mut cmd, libc::EPERM)?;
        }
        let cpus = spec.cpus.clone();
        // SAFETY: runs in the forked child before exec; `affinity::pin` is async-signal-safe
        // (it builds the set on the stack and makes one syscall; nothing is allocated).
        unsafe {
            cmd.pre_exec(move || {
                if cpus.is_empty() {
                    return Ok(());
                }
                reactor::affinity::pin(0, &cpus)
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|error| EngineError::Spawn { what, error })?;
        collect(child.stdout.take().expect("piped"), lines.clone());
        collect(child.stderr.take().expect("piped"), lines.clone());
        let pid = child.id() as libc::pid_t;
        Ok(Process {
            child: Mutex::new(child),
            pid,
            group: spec.foreign.is_some(),
        })
    }

    fn is_running(p: &Process) -> bool {
        matches!(p.child.lock().unwrap().try_wait(), Ok(None))
    }

    /// Waits for the process to exit (after SIGTERM); kills it after `limit`.
    fn wait_or_kill(p: Process, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        let mut child = p.child.into_inner().unwrap();
        while matches!(child.try_wait(), Ok(None)) {
            if std::time::Instant::now() > deadline {
                if p.group {
                    // SAFETY: kill(2) on the group our unreaped child leads.
                    unsafe { libc::kill(-p.pid, libc::SIGKILL) };
                }
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Engine for Native {
    type Handle = Process;

    fn describe(&self) -> String {
        "native".into()
    }

    fn is_native(&self) -> bool {
        true
    }

    async fn prepare(&mut self, root: &Path, _no_build: bool) -> Result<()> {
        eprintln!("bench-runner: native; building the server…");
        let root = root.to_path_buf();
        self.server =
            tokio::task::spawn_blocking(move || super::build::native_server(&root)).await??;
        Ok(())
    }

    async fn open(&self, network: Network) -> Result<Option<String>> {
        if network != Network::Host {
            return Err(EngineError::BridgeNatively);
        }
        Ok(None)
    }

    async fn close(&self, _network: Option<&str>) {}

    async fn launch(&self, spec: &ServerSpec, lines: &Lines) -> Result<Process> {
        self.start(spec, lines)
    }

    fn alive(&self, p: &Process) -> bool {
        Native::is_running(p)
    }

    fn pid(&self, p: &Process) -> Option<i32> {
        Some(p.pid)
    }

    async fn cpu_ns(&self, p: &Process) -> Option<u64> {
        process_cpu_ns(p.pid)
    }

    async fn cpu_split(&self, p: &Process) -> Option<crate::model::CpuSplit> {
        process_cpu_split(p.pid)
    }

    fn cpu_source(&self, _p: &Process) -> &'static str {
        "the process CPU clock"
    }

    async fn signal(&self, p: &Process, signal: Signal) {
        if Native::is_running(p) {
            let target = if p.group { -p.pid } else { p.pid };
            // SAFETY: kill(2) on our own child (or the process group it leads), which try_wait
            // just saw unreaped.
            unsafe { libc::kill(target, signal.number()) };
        }
    }

    async fn reap(&self, p: Process, limit: std::time::Duration) {
        tokio::task::block_in_place(|| Native::wait_or_kill(p, limit));
        // The reader threads drain the pipes right after exit.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    async fn address(
        &self,
        _p: &Process,
        _network: Option<&str>,
        target_host: &str,
    ) -> Result<String> {
        Ok(target_host.to_string())
    }

    /// Its children are this process's: there is no engine to lose.
    async fn answers(&self) -> Result<()> {
        Ok(())
    }
}

/// Reads `pipe` line by line into `lines` until it closes.
fn collect(pipe: impl Read + Send + 'static, lines: Lines) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    });
}

/// CPU time of process `pid`, all threads, in nanoseconds (the kernel's per-process CPU
/// clock: exact, where /proc/PID/stat counts in clock ticks).
/// A process's user and kernel time from `/proc/PID/stat` (fields 14 and 15, every thread's,
/// in clock ticks: 10 ms at the usual `USER_HZ` of 100, so a one-second window splits at
/// about a percent).
pub fn process_cpu_split(pid: libc::pid_t) -> Option<crate::model::CpuSplit> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    split_from_stat(&text, clock_ticks_per_second()?)
}

/// `sysconf(_SC_CLK_TCK)`: what /proc's tick counts are in.
fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf reads a constant of the running system; no pointers.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0)
}

/// utime and stime from a `/proc/PID/stat` line. The command name (field 2) is in parentheses
/// and may hold spaces or parentheses itself, so the fields are counted after its last `)`.
fn split_from_stat(text: &str, hz: u64) -> Option<crate::model::CpuSplit> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (14) and stime (15) are the 12th and 13th.
    let mut fields = rest.split_whitespace().skip(11);
    let mut ticks = || -> Option<u64> { fields.next()?.parse().ok() };
    let (utime, stime) = (ticks()?, ticks()?);
    let ns = |t: u64| t * 1_000_000_000 / hz;
    Some(crate::model::CpuSplit {
        user_ns: ns(utime),
        system_ns: ns(stime),
    })
}

pub fn process_cpu_ns(pid: libc::pid_t) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both calls only write the out-parameters we pass; a pid that has gone gives an
    // error code, not undefined behaviour.
    unsafe {
        if libc::clock_getcpuclockid(pid, &mut clock) != 0
            || libc::clock_gettime(clock, &mut ts) != 0
        {
            return None;
        }
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ForeignServer, ServerConfig, ServerKey, Subject};

    #[test]
    fn what_native_mode_cannot_do_is_refused_by_name() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let native = Native::default();
        let e = rt.block_on(native.open(Network::Bridge)).unwrap_err();
        assert!(matches!(e, EngineError::BridgeNatively), "{e}");
        let spec = ServerSpec {
            instance: 0,
            key: ServerKey {
                profile: Profile::Relaxed,
                config: Subject::Foreign("web".into()),
            },
            name: "x".into(),
            port: 1,
            cpus: vec![],
            network: None,
            loopback_only: true,
            foreign: Some(ForeignServer {
                name: "web".into(),
                launch: Launch::Image("example/web".into()),
                env: vec![],
            }),
        };
        let e = rt
            .block_on(native.launch(&spec, &Lines::default()))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "relaxed/web: image:example/web needs a Docker engine (native mode runs cmd: servers)"
        );
        let own = ServerSpec {
            instance: 0,
            key: ServerKey {
                profile: Profile::Relaxed,
                config: ServerConfig::Rx.into(),
            },
            foreign: None,
            ..spec
        };
        // No server built yet: the path is empty, and the spawn error names what it started.
        let e = rt
            .block_on(native.launch(&own, &Lines::default()))
            .err()
            .unwrap();
        assert!(
            matches!(e, EngineError::Spawn { .. }) && e.to_string().starts_with("starting "),
            "{e}"
        );
        // Aimed at loopback, our server binds loopback only; on a network of its own, all.
        let bind = |s: &ServerSpec| {
            s.env()
                .into_iter()
                .find(|(k, _)| k == "APP_BIND")
                .map(|(_, v)| v)
        };
        assert_eq!(bind(&own).as_deref(), Some("127.0.0.1"));
        let open = ServerSpec {
            loopback_only: false,
            ..own
        };
        assert_eq!(bind(&open), None);
    }

    #[test]
    fn the_split_is_read_after_the_command_name_in_clock_ticks() {
        // A name with a space and a parenthesis, as a thread may give itself.
        let line =
            "4242 (rx (w) 1) S 1 4242 4242 0 -1 4194560 310 0 0 0 37 1210 0 0 20 0 2 0 99 0 0";
        let split = split_from_stat(line, 100).unwrap();
        assert_eq!(split.user_ns, 370_000_000);
        assert_eq!(split.system_ns, 12_100_000_000);
        assert_eq!(split_from_stat("4242 (rx) S 1", 100), None);
        // This process's own: at most what its precise clock says, give or take a tick each.
        let me = std::process::id() as libc::pid_t;
        let own = process_cpu_split(me).unwrap();
        let clock = process_cpu_ns(me).unwrap();
        assert!(
            own.user_ns + own.system_ns <= clock + 20_000_000,
            "{own:?} {clock}"
        );
    }

    #[test]
    fn the_process_clock_counts_a_child_s_cpu_time_in_nanoseconds() {
        // A child that spins for ~200 ms of CPU, then sleeps so that it can still be read.
        let mut child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let first = process_cpu_ns(pid).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let second = process_cpu_ns(pid).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(second > first, "{first} {second}");
        assert!(
            !second.is_multiple_of(10_000_000) || !first.is_multiple_of(10_000_000),
            "finer than clock ticks"
        );
        let mut gone = Command::new("true").spawn().unwrap();
        let gone_pid = gone.id() as libc::pid_t;
        gone.wait().unwrap();
        assert_eq!(
            process_cpu_ns(gone_pid),
            None,
            "a reaped process has no clock"
        );
    }
}
