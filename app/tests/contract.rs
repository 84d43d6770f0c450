//! The whole contract, over real sockets, against the real binary, for every backend: io_uring,
//! epoll rx / oneshot / legacy, and `auto` under a seccomp filter that denies io_uring with
//! EPERM (Docker >= 25) and with ENOSYS (Podman, CRI-O).

mod common;

use common::*;

struct Tally {
    /// Requests the server answered (it counts exactly these).
    requests: u64,
    connections: u64,
}

impl Tally {
    fn connect(&mut self, server: &Server) -> Client {
        self.connections += 1;
        server.connect()
    }
}

fn battery(launch: Launch, expect_backend: &str) {
    let server = Server::start(launch);
    assert!(
        server.first_line.ends_with(expect_backend),
        "first line {:?} should end with {expect_backend:?}",
        server.first_line
    );
    assert!(
        server.first_line.contains(" workers=1 "),
        "{}",
        server.first_line
    );
    let mut t = Tally {
        requests: 0,
        connections: 0,
    };

    // The three routes and a miss, with the headers every response must carry.
    let mut c = t.connect(&server);
    let r = c.get("/");
    assert_eq!((r.status, r.body.as_slice()), (200, &b""[..]));
    assert_eq!(r.header("content-length"), Some("0"));
    let date = r.header("date").expect("Date header");
    assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
    let r = c.get("/user/12345");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"12345"[..]));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    c.send(b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\r\n");
    let r = c.read_response();
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert_eq!(c.get("/nope").status, 404);
    assert_eq!(c.get("/user/").status, 404);
    t.requests += 5;

    // 64 mixed requests pipelined in one write: all answered, in order.
    let mut batch = Vec::new();
    for i in 0..64 {
        match i % 3 {
            0 => batch.extend_from_slice(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"),
            1 => batch
                .extend_from_slice(format!("GET /user/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()),
            _ => batch.extend_from_slice(
                b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
            ),
        }
    }
    c.send(&batch);
    for i in 0..64 {
        let r = c.read_response();
        assert_eq!(r.status, 200, "pipelined #{i}");
        let want = if i % 3 == 1 {
            i.to_string()
        } else {
            String::new()
        };
        assert_eq!(r.body, want.as_bytes(), "pipelined #{i} out of order");
    }
    t.requests += 64;

    // A request arriving one byte at a time.
    c.send_bytewise(b"GET /user/slow HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().body, b"slow");
    t.requests += 1;

    // 500 sequential keep-alive requests on one connection.
    let mut k = t.connect(&server);
    for i in 0..500 {
        let r = k.get(&format!("/user/{i}"));
        assert_eq!(r.body, i.to_string().as_bytes());
    }
    t.requests += 500;

    // POST bodies (Content-Length, chunked, Expect: 100-continue) then another request.
    let mut p = t.connect(&server);
    p.send(b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!(p.read_response().status, 200);
    p.send(b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert_eq!(p.read_response().status, 200);
    assert_eq!(p.get("/user/after").body, b"after");
    p.send(b"POST /user HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    assert_eq!(p.read_response().status, 100);
    p.send(b"body");
    assert_eq!(p.read_response().status, 200);
    assert_eq!(p.get("/user/next").body, b"next");
    t.requests += 5;

    // Connection: close is honoured.
    let mut cc = t.connect(&server);
    cc.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = cc.read_response();
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(cc.closed_by_server());
    t.requests += 1;

    // HTTP/1.0: closes by default, keeps alive when asked.
    let mut h = t.connect(&server);
    h.send(b"GET /user/10 HTTP/1.0\r\n\r\n");
    assert_eq!(h.read_response().body, b"10");
    assert!(h.closed_by_server());
    let mut h = t.connect(&server);
    h.send(b"GET /user/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = h.read_response();
    assert_eq!(
        (r.body.as_slice(), r.header("connection")),
        (&b"1"[..], Some("keep-alive"))
    );
    h.send(b"GET /user/2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(h.read_response().body, b"2");
    t.requests += 3;

    // Malformed input: 400 and close. Oversized head: 431 and close.
    let mut m = t.connect(&server);
    m.send(b"NOT HTTP AT ALL\r\n\r\n");
    assert_eq!(m.read_response().status, 400);
    assert!(m.closed_by_server());
    let mut o = t.connect(&server);
    o.send(format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "x".repeat(10_000)).as_bytes());
    assert_eq!(o.read_response().status, 431);
    assert!(o.closed_by_server());

    // Half-close: the request is still answered, then the server closes.
    let mut hc = t.connect(&server);
    hc.send(b"GET /user/half HTTP/1.1\r\nHost: t\r\n\r\n");
    hc.half_close();
    assert_eq!(hc.read_response().body, b"half");
    assert!(hc.closed_by_server());
    t.requests += 1;

    // 300 concurrent connections.
    let mut many: Vec<Client> = (0..300).map(|_| t.connect(&server)).collect();
    for (i, c) in many.iter_mut().enumerate() {
        c.send(format!("GET /user/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    for (i, c) in many.iter_mut().enumerate() {
        assert_eq!(c.read_response().body, i.to_string().as_bytes());
    }
    t.requests += 300;
    drop(many);

    // SIGTERM: exit 0 and one JSON line whose counters match what this test did.
    let (status, json, _) = server.stop();
    assert!(status.success(), "{status:?}");
    assert_eq!(json["event"], "shutdown");
    let w = &json["workers"][0];
    assert_eq!(w["requests"].as_u64(), Some(t.requests), "{json}");
    assert_eq!(w["connections"].as_u64(), Some(t.connections), "{json}");
    let sc = &w["syscalls"];
    let n = |k: &str| sc[k].as_u64().unwrap_or_else(|| panic!("no {k} in {sc}"));
    match json["backend"].as_str().unwrap() {
        "io_uring" => {
            assert_eq!(n("epoll_wait") + n("recvfrom") + n("sendto"), 0, "{sc}");
            assert!(n("io_uring_enter") > 0);
        }
        "epoll/rx" => {
            assert_eq!(n("epoll_ctl_mod"), 0, "rx registers once: {sc}");
            assert_eq!(w["epoll_ctl_refused"], 0);
            assert!(n("epoll_ctl_add") <= t.connections + 2, "{sc}");
        }
        "epoll/oneshot" => assert_eq!(w["epoll_ctl_refused"], 0, "the hint avoids EEXIST"),
        "epoll/legacy" => assert!(w["epoll_ctl_refused"].as_u64().unwrap() > 500, "{w}"),
        other => panic!("backend {other}"),
    }
}

fn launch<'a>(env: &'a [(&'a str, &'a str)], deny: Option<i32>) -> Launch<'a> {
    Launch {
        env,
        deny_io_uring: deny,
    }
}

#[test]
fn io_uring() {
    battery(
        launch(&[("APP_BACKEND", "io_uring")], None),
        "backend=io_uring io_uring=active(defer_taskrun+single_issuer,recv_multishot)",
    );
}

#[test]
fn io_uring_with_a_receive_sqe_per_request() {
    battery(
        launch(
            &[("APP_BACKEND", "io_uring"), ("APP_RECV_MULTISHOT", "0")],
            None,
        ),
        "backend=io_uring io_uring=active(defer_taskrun+single_issuer)",
    );
}

#[test]
fn epoll_rx() {
    battery(
        launch(&[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "rx")], None),
        "backend=epoll/rx io_uring=not-tried",
    );
}

#[test]
fn epoll_oneshot() {
    battery(
        launch(
            &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "oneshot")],
            None,
        ),
        "backend=epoll/oneshot io_uring=not-tried",
    );
}

#[test]
fn epoll_legacy() {
    battery(
        launch(
            &[("APP_BACKEND", "epoll"), ("APP_EPOLL_MODE", "legacy")],
            None,
        ),
        "backend=epoll/legacy io_uring=not-tried",
    );
}

#[test]
fn auto_under_docker_25_seccomp_eperm() {
    battery(
        launch(&[], Some(libc::EPERM)),
        "backend=epoll/rx io_uring=unavailable(EPERM)",
    );
}

#[test]
fn auto_under_podman_seccomp_enosys() {
    battery(
        launch(&[], Some(libc::ENOSYS)),
        "backend=epoll/rx io_uring=unavailable(ENOSYS)",
    );
}
