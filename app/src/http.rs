//! The-benchmarker contract over HTTP/1.x: turns the bytes a connection received into the
//! responses it owes, in order. Pure (no I/O), so the worker stays a thin loop around it.

use crate::chunked::{ChunkError, Chunked};

/// Request head larger than this is answered 431.
pub const MAX_HEAD: usize = 8 * 1024;
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body: u64,
}

/// What the connection does once the responses written so far are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    KeepAlive,
    Close,
}

#[derive(Debug)]
enum Body {
    None,
    Length(u64),
    Chunked(Chunked),
}

/// Per-connection parse state: the body of the last request still being skipped.
#[derive(Debug)]
pub struct Connection {
    body: Body,
}

impl Default for Connection {
    fn default() -> Self {
        Connection { body: Body::None }
    }
}

/// What one call to [`Connection::process`] did.
#[derive(Debug, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of input used; the rest (a partial request) must be offered again with more.
    pub consumed: usize,
    /// Complete requests answered.
    pub requests: u64,
    pub after: After,
}

impl Connection {
    /// True while a request is partly received (its head or its body).
    pub fn in_body(&self) -> bool {
        !matches!(self.body, Body::None)
    }

    /// Answers every complete request in `input`, appending the responses to `out`.
    pub fn process(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        date: &str,
        limits: Limits,
    ) -> Progress {
        let mut pos = 0;
        let mut requests = 0;
        let done = |pos, requests, after| Progress {
            consumed: pos,
            requests,
            after,
        };
        loop {
            match &mut self.body {
                Body::None => {}
                Body::Length(left) => {
                    let take = (*left).min((input.len() - pos) as u64);
                    *left -= take;
                    pos += take as usize;
                    if *left > 0 {
                        return done(pos, requests, After::KeepAlive);
                    }
                    self.body = Body::None;
                }
                Body::Chunked(skipper) => match skipper.feed(&input[pos..]) {
                    Ok((used, finished)) => {
                        pos += used;
                        if !finished {
                            return done(pos, requests, After::KeepAlive);
                        }
                        self.body = Body::None;
                    }
                    Err(ChunkError::Malformed) => {
                        respond_error(out, 400, date);
                        return done(input.len(), requests, After::Close);
                    }
                    Err(ChunkError::TooLarge) => {
                        respond_error(out, 413, date);
                        return done(input.len(), requests, After::Close);
                    }
                },
            }
            if pos == input.len() {
                return done(pos, requests, After::KeepAlive);
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            let head_len = match req.parse(&input[pos..]) {
                Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
                Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => {
                    respond_error(out, 431, date);
                    return done(input.len(), requests, After::Close);
                }
                Ok(httparse::Status::Partial) if input.len() - pos > MAX_HEAD => {
                    respond_error(out, 431, date);
                    return done(input.len(), requests, After::Close);
                }
                Ok(httparse::Status::Partial) => return done(pos, requests, After::KeepAlive),
                Err(_) => {
                    respond_error(out, 400, date);
                    return done(input.len(), requests, After::Close);
                }
            };
            let head = match Head::read(&req) {
                Ok(head) => head,
                Err(status) => {
                    respond_error(out, status, date);
                    return done(input.len(), requests, After::Close);
                }
            };
            pos += head_len;
            requests += 1;
            let body_len = match head.body {
                BodyKind::Length(n) => n,
                BodyKind::Chunked => 0,
            };
            if body_len > limits.max_body {
                respond_error(out, 413, date);
                return done(input.len(), requests, After::Close);
            }
            let body_present = match head.body {
                BodyKind::Length(n) => (input.len() - pos) as u64 >= n,
                BodyKind::Chunked => false,
            };
            if head.expect_continue && !body_present {
                out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            let after = if head.keep_alive {
                After::KeepAlive
            } else {
                After::Close
            };
            respond_route(
                out,
                req.method.unwrap_or(""),
                req.path.unwrap_or(""),
                date,
                head.version,
                after,
            );
            self.body = match head.body {
                BodyKind::Length(0) => Body::None,
                BodyKind::Length(n) => Body::Length(n),
                BodyKind::Chunked => Body::Chunked(Chunked::new(limits.max_body)),
            };
            if after == After::Close {
                return done(input.len(), requests, After::Close);
            }
        }
    }
}

enum BodyKind {
    Length(u64),
    Chunked,
}

/// What the contract needs from a request head.
struct Head {
    version: u8,
    keep_alive: bool,
    expect_continue: bool,
    body: BodyKind,
}

impl Head {
    /// Reads the head; `Err(status)` for a request that must be refused.
    fn read(req: &httparse::Request) -> Result<Head, u16> {
        let version = req.version.unwrap_or(1);
        let (mut close, mut keep_alive_token, mut expect_continue) = (false, false, false);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        for h in req.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case("content-length") {
                let n = parse_length(h.value).ok_or(400u16)?;
                // Repeated, differing lengths are a smuggling vector: refuse.
                if length.is_some_and(|l| l != n) {
                    return Err(400);
                }
                length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                let last = h
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .unwrap_or(b"")
                    .trim_ascii();
                if !last.eq_ignore_ascii_case(b"chunked") {
                    return Err(400);
                }
                chunked = true;
            } else if name.eq_ignore_ascii_case("expect") {
                expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
            }
        }
        if chunked && length.is_some() {
            return Err(400); // RFC 9112 §6.3: a server may reject this, and should
        }
        let keep_alive = !close && (version == 1 || keep_alive_token);
        Ok(Head {
            version,
            keep_alive,
            expect_continue,
            body: if chunked {
                BodyKind::Chunked
            } else {
                BodyKind::Length(length.unwrap_or(0))
            },
        })
    }
}

fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter()
        .try_fold(0u64, |n, d| Some(n * 10 + u64::from(d - b'0')))
}

fn respond_route(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
    date: &str,
    version: u8,
    after: After,
) {
    let path = target.split('?').next().unwrap_or("");
    let connection = match (after, version) {
        (After::Close, _) => Some("close"),
        (After::KeepAlive, 0) => Some("keep-alive"),
        (After::KeepAlive, _) => None,
    };
    match (method, path) {
        ("GET", "/") | ("POST", "/user") => respond(out, 200, b"", None, date, connection),
        ("GET", p) => match p.strip_prefix("/user/") {
            Some(id) if !id.is_empty() && !id.contains('/') => respond(
                out,
                200,
                id.as_bytes(),
                Some("text/plain"),
                date,
                connection,
            ),
            _ => respond(out, 404, b"", None, date, connection),
        },
        _ => respond(out, 404, b"", None, date, connection),
    }
}

/// A refusal: the connection closes after it.
fn respond_error(out: &mut Vec<u8>, status: u16, date: &str) {
    respond(out, status, b"", None, date, Some("close"));
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    }
}

fn respond(
    out: &mut Vec<u8>,
    status: u16,
    body: &[u8],
    content_type: Option<&str>,
    date: &str,
    connection: Option<&str>,
) {
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(num.format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(date.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(num.format(body.len()).as_bytes());
    if let Some(ct) = content_type {
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(ct.as_bytes());
    }
    if let Some(c) = connection {
        out.extend_from_slice(b"\r\nConnection: ");
        out.extend_from_slice(c.as_bytes());
    }
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Mon, 30 Nov 2026 16:00:00 GMT";
    const LIMITS: Limits = Limits { max_body: 1024 };

    fn run(input: &[u8]) -> (String, Progress) {
        let mut out = Vec::new();
        let p = Connection::default().process(input, &mut out, DATE, LIMITS);
        (String::from_utf8(out).unwrap(), p)
    }

    fn statuses(out: &str) -> Vec<&str> {
        out.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect()
    }

    #[test]
    fn routes() {
        let (out, p) = run(b"GET /user/42 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(p.requests, 1);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 16:00:00 GMT\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\n42"), "{out}");
        assert_eq!(statuses(&run(b"GET / HTTP/1.1\r\n\r\n").0), ["200"]);
        assert_eq!(statuses(&run(b"POST /user HTTP/1.1\r\n\r\n").0), ["200"]);
        for miss in [
            "GET /user/ ",
            "GET /user/1/2 ",
            "GET /users ",
            "POST / ",
            "PUT /user ",
            "GET /user ",
        ] {
            let req = format!("{miss}HTTP/1.1\r\n\r\n");
            assert_eq!(statuses(&run(req.as_bytes()).0), ["404"], "{miss}");
        }
        assert_eq!(
            run(b"GET /user/7?x=1 HTTP/1.1\r\n\r\n")
                .0
                .rsplit("\r\n\r\n")
                .next(),
            Some("7")
        );
    }

    #[test]
    fn keep_alive_rules() {
        assert_eq!(run(b"GET / HTTP/1.1\r\n\r\n").1.after, After::KeepAlive);
        let (out, p) = run(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n");
        assert_eq!(
            (p.after, p.requests, statuses(&out).len()),
            (After::Close, 1, 1)
        );
        assert!(out.contains("Connection: close"));
        assert_eq!(run(b"GET / HTTP/1.0\r\n\r\n").1.after, After::Close);
        let (out, p) = run(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert_eq!(p.after, After::KeepAlive);
        assert!(out.contains("Connection: keep-alive"));
    }

    #[test]
    fn bodies_are_skipped_so_the_next_request_parses() {
        let (out, p) = run(
            b"POST /user HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /user/9 HTTP/1.1\r\n\r\n",
        );
        assert_eq!((p.requests, statuses(&out)), (2, vec!["200", "200"]));
        assert!(out.ends_with("9"));
        let input = b"POST /user HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        let (out, p) = run(input);
        assert_eq!(
            (p.requests, statuses(&out).len(), p.consumed),
            (2, 2, input.len())
        );
    }

    #[test]
    fn a_request_split_anywhere_is_reassembled() {
        let input =
            b"POST /user HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /user/5 HTTP/1.1\r\n\r\n";
        for split in 1..input.len() {
            let mut conn = Connection::default();
            let mut buf = Vec::new();
            let mut out = Vec::new();
            let mut requests = 0;
            for piece in input.chunks(split) {
                buf.extend_from_slice(piece);
                let p = conn.process(&buf, &mut out, DATE, LIMITS);
                requests += p.requests;
                buf.drain(..p.consumed);
            }
            assert_eq!(requests, 2, "split {split}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn refusals_close() {
        for (input, status) in [
            (&b"GARBAGE\r\n\r\n"[..], "400"),
            (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", "400"),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "400",
            ),
            (
                b"POST /user HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "400",
            ),
            (
                b"POST /user HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                "400",
            ),
            (
                b"POST /user HTTP/1.1\r\nContent-Length: 99999\r\n\r\n",
                "413",
            ),
            (
                b"POST /user HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n",
                "413",
            ),
            (
                b"POST /user HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "400",
            ),
        ] {
            let (out, p) = run(input);
            assert_eq!(
                statuses(&out).last(),
                Some(&status),
                "{}",
                String::from_utf8_lossy(input)
            );
            assert_eq!(p.after, After::Close);
            assert!(out.contains("Connection: close"));
        }
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(statuses(&run(big.as_bytes()).0), ["431"]);
        let partial = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(statuses(&run(partial.as_bytes()).0), ["431"]);
        let many: String = (0..100).map(|i| format!("X{i}: 1\r\n")).collect();
        assert_eq!(
            statuses(&run(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()).0),
            ["431"]
        );
    }

    #[test]
    fn expect_continue_gets_an_interim_response_only_while_the_body_is_missing() {
        let (out, _) =
            run(b"POST /user HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"),
            "{out}"
        );
        let (out, _) =
            run(b"POST /user HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    }
}
