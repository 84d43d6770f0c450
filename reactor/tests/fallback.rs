//! Backend choice under a seccomp filter that denies io_uring, as Docker >= 25 (EPERM) and
//! Podman / CRI-O (ENOSYS) do. The reactor runs in a child process (reactor-probe) so that the
//! filter does not touch the test process.

use std::process::{Command, Output};

const PROBE: &str = env!("CARGO_BIN_EXE_reactor-probe");

fn probe(backend: &str, deny: Option<i32>) -> Output {
    let mut cmd = Command::new(PROBE);
    cmd.args(["--backend", backend, "--conns", "0"]);
    if let Some(errno) = deny {
        sandbox::deny_io_uring_in_child(&mut cmd, errno).unwrap();
    }
    cmd.output().unwrap()
}

fn first_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn auto_uses_io_uring_when_the_kernel_allows_it() {
    let out = probe("auto", None);
    assert!(out.status.success(), "{out:?}");
    let line = first_line(&out);
    assert!(
        line.contains("backend=io_uring io_uring=active("),
        "this machine kind runs io_uring natively: {line}"
    );
}

#[test]
fn auto_falls_back_to_epoll_and_names_the_errno() {
    for (errno, name) in [(libc::EPERM, "EPERM"), (libc::ENOSYS, "ENOSYS")] {
        let out = probe("auto", Some(errno));
        assert!(out.status.success(), "{out:?}");
        let line = first_line(&out);
        assert!(
            line.ends_with(&format!("backend=epoll/rx io_uring=unavailable({name})")),
            "{line}"
        );
    }
}

#[test]
fn forced_io_uring_fails_clearly_instead_of_falling_back() {
    for (errno, name) in [(libc::EPERM, "EPERM"), (libc::ENOSYS, "ENOSYS")] {
        let out = probe("io_uring", Some(errno));
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty(), "nothing may run: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("io_uring was requested but is unavailable") && err.contains(name),
            "{err}"
        );
    }
}

#[test]
fn epoll_requested_never_tries_io_uring() {
    let out = probe("epoll", Some(libc::EPERM));
    assert!(first_line(&out).ends_with("backend=epoll/rx io_uring=not-tried"));
}
