//! deny-io-uring: runs a command under the project's no-io-uring filter, as Docker >= 25 would
//! (`deny-io-uring [--errno EPERM|ENOSYS] -- COMMAND [ARGS...]`): the filter is installed in
//! this process, which then becomes COMMAND (exec), so nothing runs between the two. For
//! scripts that profile or trace a server under the block without an engine
//! (scripts/profile.sh's `blocked`). Exit status 2 with a message when it cannot.

use std::os::unix::process::CommandExt;
use std::process::Command;

const USAGE: &str = "usage: deny-io-uring [--errno EPERM|ENOSYS] -- COMMAND [ARGS...]";

fn main() {
    let err = run();
    eprintln!("deny-io-uring: {err}");
    std::process::exit(2);
}

/// Only returns what stopped it: on success the process is COMMAND.
fn run() -> String {
    let mut args = std::env::args().skip(1);
    let mut errno = libc::EPERM;
    loop {
        match args.next().as_deref() {
            Some("--errno") => {
                errno = match args.next().as_deref() {
                    Some("EPERM") => libc::EPERM,
                    Some("ENOSYS") => libc::ENOSYS,
                    other => return format!("--errno {other:?}: EPERM or ENOSYS\n{USAGE}"),
                }
            }
            Some("--") => break,
            other => return format!("unexpected {other:?}\n{USAGE}"),
        }
    }
    let Some(program) = args.next() else {
        return format!("no command\n{USAGE}");
    };
    if let Err(e) = sandbox::deny_io_uring_in_this_thread(errno) {
        return e.to_string();
    }
    // exec keeps the filter (seccomp filters survive execve) and replaces this process.
    let e = Command::new(&program).args(args).exec();
    format!("{program}: {e}")
}
