//! The deny-io-uring wrapper: the command it runs gets the errno for io_uring_setup and
//! everything else as usual; bad usage is exit status 2 with the reason.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_deny-io-uring");

/// io_uring_setup(1, {0}) from python3's ctypes: prints 0 (a ring) or the errno.
const SETUP: &str = "import ctypes; l = ctypes.CDLL(None, use_errno=True); \
    r = l.syscall(425, 1, ctypes.create_string_buffer(120)); \
    print(0 if r >= 0 else ctypes.get_errno())";

fn errno_under(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .args(["--", "python3", "-c", SETUP])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_command_gets_the_chosen_errno_and_its_own_exit_status() {
    assert_eq!(errno_under(&[]), libc::EPERM.to_string());
    assert_eq!(
        errno_under(&["--errno", "ENOSYS"]),
        libc::ENOSYS.to_string()
    );
    let status = Command::new(BIN)
        .args(["--", "sh", "-c", "exit 7"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(7));
}

#[test]
fn bad_usage_names_the_cause() {
    for args in [&["--errno", "EBADF", "--", "true"][..], &["true"], &["--"]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("usage"),
            "{out:?}"
        );
    }
    let out = Command::new(BIN)
        .args(["--", "/no/such/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/program"));
}
