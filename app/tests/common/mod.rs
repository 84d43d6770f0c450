#![allow(dead_code)] // each test binary uses part of this

//! Starts the real `server` binary and talks to it over real sockets. The HTTP reading here is
//! deliberately separate from the server's own code: a shared bug would cancel out.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

pub mod hostile;
pub mod load;

pub const SERVER: &str = env!("CARGO_BIN_EXE_server");

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub first_line: String,
    stderr: Option<BufReader<ChildStderr>>,
    stdout: Option<BufReader<ChildStdout>>,
}

/// How a test wants the server launched.
pub struct Launch<'a> {
    pub env: &'a [(&'a str, &'a str)],
    /// Deny io_uring in the child with this errno (Docker >= 25: EPERM; Podman: ENOSYS).
    pub deny_io_uring: Option<i32>,
}

impl Server {
    pub fn start(launch: Launch) -> Server {
        Server::start_through(&[], launch)
    }

    /// The server started through `wrapper` (`prlimit --nofile=…`, `strace -f -c -o FILE`),
    /// which must exec it or run it as its child with the same stdout and stderr.
    pub fn start_through(wrapper: &[&str], launch: Launch) -> Server {
        let mut cmd = match wrapper.split_first() {
            None => Command::new(SERVER),
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(SERVER);
                c
            }
        };
        // Loopback only: a test's server is no one else's to reach.
        cmd.env("APP_BIND", "127.0.0.1")
            .env("APP_PORT", "0")
            .env("APP_WORKERS", "1")
            .envs(launch.env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(errno) = launch.deny_io_uring {
            sandbox::deny_io_uring_in_child(&mut cmd, errno).unwrap();
        }
        // The server dies with the test that started it, however the test ends (a server kept
        // for a whole test binary, as framing.rs keeps one per backend, included).
        sandbox::die_with_spawning_thread(&mut cmd);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {wrapper:?} {SERVER}: {e}"));
        let stdout = Some(BufReader::new(child.stdout.take().unwrap()));
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first_line = String::new();
        stderr.read_line(&mut first_line).unwrap();
        let first_line = first_line.trim_end().to_string();
        let port = first_line
            .strip_prefix("server listening on 127.0.0.1:")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {first_line:?}"));
        Server {
            child: Some(child),
            port,
            first_line,
            stderr: Some(stderr),
            stdout,
        }
    }

    /// The pid of the process started (the wrapper's, when there is one).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// The server's stderr after its first line, for a test that follows it.
    pub fn take_stderr(&mut self) -> BufReader<ChildStderr> {
        self.stderr.take().expect("stderr not taken yet")
    }

    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
    }

    /// Waits for the server to exit (after a signal), without reading its output.
    pub fn wait(&mut self) -> ExitStatus {
        self.child.take().unwrap().wait().unwrap()
    }

    /// SIGUSR1, then the counters line the server prints for it (it keeps serving).
    pub fn snapshot(&mut self) -> serde_json::Value {
        self.signal(libc::SIGUSR1);
        let mut line = String::new();
        self.stdout.as_mut().unwrap().read_line(&mut line).unwrap();
        serde_json::from_str(line.trim())
            .unwrap_or_else(|e| panic!("not a JSON counters line ({e}): {line:?}"))
    }

    pub fn connect(&self) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    /// SIGTERM, then the exit status and the JSON counters line from stdout.
    pub fn stop(self) -> (ExitStatus, serde_json::Value, String) {
        self.stop_with(libc::SIGTERM)
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: plain kill(2) on our own, not yet reaped, child.
        unsafe { libc::kill(pid, sig) };
    }

    pub fn stop_with(self, sig: i32) -> (ExitStatus, serde_json::Value, String) {
        self.signal(sig);
        self.exited()
    }

    /// After a stop signal already sent: the exit status and the JSON counters line.
    pub fn exited(mut self) -> (ExitStatus, serde_json::Value, String) {
        let mut child = self.child.take().unwrap();
        let mut stdout = String::new();
        self.stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let mut rest = String::new();
        if let Some(mut stderr) = self.stderr.take() {
            stderr.read_to_string(&mut rest).unwrap();
        }
        let status = child.wait().unwrap();
        let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!("stdout is not one JSON line ({e}): {stdout:?}; stderr: {rest}")
        });
        (status, json, rest)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads a bodiless answer (`GET /` answers an empty body, so its head is all of it) one read
/// at a time: `Ok` for a 200, else what came, or the read's error.
pub fn read_bodiless_200(s: &mut impl Read) -> Result<(), String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) => return Err(format!("EOF after {:?}", String::from_utf8_lossy(&got))),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    match got.starts_with(b"HTTP/1.1 200 ") {
        true => Ok(()),
        false => Err(format!("{:?}", String::from_utf8_lossy(&got))),
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Client {
    pub stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).unwrap();
    }

    pub fn send_bytewise(&mut self, raw: &[u8]) {
        for b in raw {
            self.stream.write_all(std::slice::from_ref(b)).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub fn read_response(&mut self) -> Response {
        self.try_read_response().expect("a response, not a close")
    }

    /// `None` when the server closed the connection cleanly between two responses.
    pub fn try_read_response(&mut self) -> Option<Response> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        let mut parts = line.trim_end().splitn(3, ' ');
        assert_eq!(parts.next(), Some("HTTP/1.1"), "status line {line:?}");
        let status: u16 = parts.next().unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (n, v) = h.split_once(':').unwrap_or_else(|| panic!("header {h:?}"));
            headers.push((n.to_string(), v.trim().to_string()));
        }
        let mut r = Response {
            status,
            headers,
            body: Vec::new(),
        };
        if let Some(len) = r.header("content-length") {
            r.body = vec![0; len.parse().unwrap()];
            self.reader.read_exact(&mut r.body).unwrap();
        }
        Some(r)
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.read_response()
    }

    /// True when the server closed the connection (EOF or reset) within the read timeout;
    /// false when the timeout passed first. Panics on unexpected bytes.
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.reader.read(&mut b) {
            Ok(0) => true,
            Ok(_) => panic!("unexpected byte {:?} instead of a close", b[0] as char),
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => false,
                _ => true, // reset
            },
        }
    }

    pub fn set_read_timeout(&self, d: Duration) {
        self.stream.set_read_timeout(Some(d)).unwrap();
    }

    pub fn half_close(&self) {
        self.stream.shutdown(Shutdown::Write).unwrap();
    }
}
