//! The-benchmarker contract over HTTP/1.x: turns the bytes a connection received into the
//! responses it owes, in order. Pure (no I/O), so the worker stays a thin loop around it.

use crate::chunked::{ChunkError, Chunked};

/// Request head larger than this is answered 431 (a request line larger than this, 414).
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

/// A request whose head was read and whose body is still arriving. Its answer is decided but
/// not sent: a body that turns out malformed gets one refusal instead — never a 200 followed by
/// a second status line that a pipelining client would take for its next request's answer.
#[derive(Debug)]
enum Body {
    None,
    Length { left: u64, answer: Answer },
    Chunked { skipper: Chunked, answer: Answer },
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
    /// Closing at the end of a request the client itself made its last (`Connection: close`,
    /// HTTP/1.0), with no byte after it: nothing is left unread, so the connection may close
    /// at once instead of lingering (a refusal always lingers: a body may still be coming).
    pub ends_clean: bool,
}

/// The contract's routes, as a request's method and path select them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route<Id> {
    /// `GET /`, `POST /user`: 200, empty body.
    Empty,
    /// `GET /user/:id`: 200, the id as `text/plain`.
    User(Id),
    NotFound,
}

/// A response decided from a request head: what to send and how the connection goes on.
#[derive(Debug)]
struct Answer {
    route: Route<Box<str>>,
    version: u8,
    after: After,
    /// `HEAD`: the headers of the `GET`, no body.
    head_only: bool,
}

impl Answer {
    fn write(&self, out: &mut Vec<u8>, stamp: &Stamp) {
        let route = match &self.route {
            Route::Empty => Route::Empty,
            Route::User(id) => Route::User(&**id),
            Route::NotFound => Route::NotFound,
        };
        respond_route(out, &route, stamp, self.version, self.after, self.head_only);
    }
}

/// What an answer needs from the clock, made once a second: the Date value, and the whole of
/// the answer most requests get (200, no body, keep-alive on HTTP/1.1), which is then one copy
/// instead of eight appends (callgrind: ~170 instructions a request, docs/performance.md).
pub struct Stamp {
    date: String,
    ok_empty: Vec<u8>,
}

impl Stamp {
    /// `date`: an HTTP-date (RFC 9110 §5.6.7), the Date header's value.
    pub fn new(date: String) -> Stamp {
        let mut ok_empty = Vec::new();
        respond(&mut ok_empty, 200, b"", None, &date, None);
        Stamp { date, ok_empty }
    }
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
        stamp: &Stamp,
        limits: Limits,
    ) -> Progress {
        let mut pos = 0;
        let mut requests = 0;
        let done = |pos, requests, after| Progress {
            consumed: pos,
            requests,
            after,
            ends_clean: false,
        };
        // The client's last request answered, at `pos`: the rest of the input is discarded.
        let last = |pos: usize, requests| Progress {
            ends_clean: pos == input.len(),
            ..done(input.len(), requests, After::Close)
        };
        let refuse = |out: &mut Vec<u8>, status, requests| {
            respond_error(out, status, &stamp.date);
            done(input.len(), requests, After::Close)
        };
        loop {
            // Finish skipping the body of the request before, then answer it.
            let finished = match &mut self.body {
                Body::None => false,
                Body::Length { left, .. } => {
                    let take = (*left).min((input.len() - pos) as u64);
                    *left -= take;
                    pos += take as usize;
                    if *left > 0 {
                        return done(pos, requests, After::KeepAlive);
                    }
                    true
                }
                Body::Chunked { skipper, .. } => match skipper.feed(&input[pos..]) {
                    Ok((used, finished)) => {
                        pos += used;
                        if !finished {
                            return done(pos, requests, After::KeepAlive);
                        }
                        true
                    }
                    Err(ChunkError::Malformed) => return refuse(out, 400, requests),
                    Err(ChunkError::TooLarge) => return refuse(out, 413, requests),
                },
            };
            if finished {
                let (Body::Length { answer, .. } | Body::Chunked { answer, .. }) =
                    std::mem::replace(&mut self.body, Body::None)
                else {
                    unreachable!("a body was being skipped")
                };
                answer.write(out, stamp);
                requests += 1;
                if answer.after == After::Close {
                    return last(pos, requests);
                }
            }
            if pos == input.len() {
                return done(pos, requests, After::KeepAlive);
            }
            // Uninitialised: filling 64 empty headers before each parse costs ~140
            // instructions a request, a quarter of parsing a one-header head (callgrind,
            // docs/performance.md).
            let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut []);
            let rest = &input[pos..];
            let head_len = match req.parse_with_uninit_headers(rest, &mut headers) {
                Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
                Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => {
                    return refuse(out, too_large(rest), requests);
                }
                Ok(httparse::Status::Partial) if rest.len() > MAX_HEAD => {
                    return refuse(out, too_large(rest), requests);
                }
                Ok(httparse::Status::Partial) => return done(pos, requests, After::KeepAlive),
                Err(_) => return refuse(out, 400, requests),
            };
            if !lines_end_in_crlf(&rest[..head_len], &req) {
                return refuse(out, 400, requests);
            }
            let head = match Head::read(&req) {
                Ok(head) => head,
                Err(status) => return refuse(out, status, requests),
            };
            pos += head_len;
            let body_len = match head.body {
                BodyKind::Length(n) => n,
                BodyKind::Chunked => 0,
            };
            if body_len > limits.max_body {
                return refuse(out, 413, requests);
            }
            let body_present = match head.body {
                BodyKind::Length(n) => (input.len() - pos) as u64 >= n,
                BodyKind::Chunked => false,
            };
            // RFC 9110 §10.1.1: an HTTP/1.0 client cannot understand an interim response.
            if head.expect_continue && head.version == 1 && !body_present {
                out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            let after = if head.keep_alive {
                After::KeepAlive
            } else {
                After::Close
            };
            let method = req.method.unwrap_or("");
            let head_only = method == "HEAD";
            let route = route(method, origin_path(req.path.unwrap_or("")));
            match head.body {
                BodyKind::Length(0) => {
                    respond_route(out, &route, stamp, head.version, after, head_only);
                    requests += 1;
                    if after == After::Close {
                        return last(pos, requests);
                    }
                }
                body => {
                    let answer = Answer {
                        route: match route {
                            Route::Empty => Route::Empty,
                            Route::User(id) => Route::User(id.into()),
                            Route::NotFound => Route::NotFound,
                        },
                        version: head.version,
                        after,
                        head_only,
                    };
                    self.body = match body {
                        BodyKind::Length(left) => Body::Length { left, answer },
                        BodyKind::Chunked => Body::Chunked {
                            skipper: Chunked::new(limits.max_body),
                            answer,
                        },
                    };
                }
            }
        }
    }
}

/// Every line of the head ends in CRLF. httparse accepts a bare LF as a line end (RFC 9112
/// §2.2 lets a recipient), but a proxy in front that reads only CRLF then sees other fields —
/// `X: a\nContent-Length: 23` is one field there and two here, a smuggling pair — so, as in
/// chunk lines, the head is held to CRLF.
///
/// httparse has found the lines already: each ends right after the request line's version or a
/// field's value (and the whitespace it trimmed off), and the head with its blank line. So only
/// those bytes are looked at — a scan of every byte cost ~210 instructions a request, a tenth of
/// the whole HTTP path (callgrind, docs/performance.md). A head this does not recognise (lines
/// before the request line, an empty field value) gets the full scan.
fn lines_end_in_crlf(head: &[u8], req: &httparse::Request) -> bool {
    let full_scan = || !memchr::memchr_iter(b'\n', head).any(|i| i == 0 || head[i - 1] != b'\r');
    // Where `part` (a slice httparse took out of `head`) ends, as an offset into `head`.
    let end_of = |part: &[u8]| {
        (part.as_ptr() as usize)
            .checked_sub(head.as_ptr() as usize)
            .map(|at| at + part.len())
            .filter(|&end| end <= head.len())
    };
    let cr_after = |mut at: usize| {
        while matches!(head.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        head.get(at) == Some(&b'\r')
    };
    let starts_the_head = req.method.is_some_and(|m| m.as_ptr() == head.as_ptr());
    // The request line: the target, then " HTTP/1.x" (9 bytes), then its line end.
    let line_end = req
        .path
        .and_then(|p| end_of(p.as_bytes()))
        .map(|end| end + 9);
    let (true, Some(line_end)) = (starts_the_head, line_end) else {
        return full_scan();
    };
    if head.get(line_end) != Some(&b'\r') {
        return full_scan();
    }
    for h in req.headers.iter() {
        match end_of(h.value) {
            Some(end) if !h.value.is_empty() => {
                if !cr_after(end) {
                    return false;
                }
            }
            _ => return full_scan(),
        }
    }
    head.len() >= 2 && head[head.len() - 2] == b'\r'
}

/// 414 when the request line alone is over the limit, 431 when the header fields are.
fn too_large(head: &[u8]) -> u16 {
    let line = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    if line > MAX_HEAD {
        414
    } else {
        431
    }
}

/// The path of a request target: origin-form as it is, absolute-form (`http://host/path`,
/// RFC 9112 §3.2.2: a server MUST accept it) without its scheme and authority.
fn origin_path(target: &str) -> &str {
    let b = target.as_bytes();
    let scheme = if b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if b.len() >= 8 && b[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return target;
    };
    let rest = &target[scheme..];
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
        // No path (`http://host` or `http://host?q`): the path is `/`.
        _ => "/",
    }
}

fn route<'a>(method: &str, target: &'a str) -> Route<&'a str> {
    // A byte loop: paths are short, and `split('?')`'s searcher costs ~50 instructions on `/`.
    let path = match target.bytes().position(|b| b == b'?') {
        Some(i) => &target[..i],
        None => target,
    };
    match (method, path) {
        ("GET" | "HEAD", "/") | ("POST", "/user") => Route::Empty,
        ("GET" | "HEAD", p) => match p.strip_prefix("/user/") {
            Some(id) if !id.is_empty() && !id.contains('/') => Route::User(id),
            _ => Route::NotFound,
        },
        _ => Route::NotFound,
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
    /// Reads the head; `Err(status)` for a request that must be refused (and the connection
    /// closed: after a framing doubt nothing that follows can be trusted).
    fn read(req: &httparse::Request) -> Result<Head, u16> {
        // RFC 3986 has no bytes above 0x7F in a URI: a peer that percent-encodes them sees
        // another path than one that routes them raw.
        if !req.path.unwrap_or("").is_ascii() {
            return Err(400);
        }
        let version = req.version.unwrap_or(1);
        let (mut close, mut keep_alive_token, mut expect_continue) = (false, false, false);
        let mut length: Option<u64> = None;
        let mut codings = 0;
        let mut te_fields = 0;
        let mut chunked_last = false;
        let mut hosts = 0;
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
                te_fields += 1;
                // Field lines of one name form one list, in order (RFC 9110 §5.3).
                for coding in h.value.split(|&b| b == b',') {
                    let coding = coding.trim_ascii();
                    if coding.is_empty() {
                        continue;
                    }
                    if chunked_last {
                        // Anything after `chunked` (`chunked` twice included): the body's
                        // end cannot be found (RFC 9112 §6.3).
                        return Err(400);
                    }
                    codings += 1;
                    chunked_last = coding.eq_ignore_ascii_case(b"chunked");
                    if !chunked_last {
                        // A coding this server does not implement (RFC 9112 §6.1).
                        return Err(501);
                    }
                }
            } else if name.eq_ignore_ascii_case("expect") {
                expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
            } else if name.eq_ignore_ascii_case("host") {
                hosts += 1;
                if !valid_host(h.value) {
                    return Err(400);
                }
            }
        }
        // RFC 9112 §3.2: no Host on HTTP/1.1, or more than one anywhere: 400.
        if hosts > 1 || (version == 1 && hosts == 0) {
            return Err(400);
        }
        if te_fields > 0 && codings == 0 {
            // A Transfer-Encoding with no coding: framing a front end may read otherwise.
            return Err(400);
        }
        let chunked = codings > 0;
        if chunked && length.is_some() {
            return Err(400); // RFC 9112 §6.3: a server may reject this, and should
        }
        if chunked && version == 0 {
            return Err(400); // RFC 9112 §6.1: Transfer-Encoding on 1.0 is faulty framing
        }
        // RFC 9110 §9.1: an origin server SHOULD answer 501 to a method it does not
        // recognise. Refused (and closed) like the other 501, last, so that a framing fault
        // is still a 400. A standard method outside the contract is a 404 (`route`).
        if !standard_method(req.method.unwrap_or("")) {
            return Err(501);
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

/// The methods of RFC 9110 §9 and PATCH (RFC 5789): the ones this server recognises.
fn standard_method(m: &str) -> bool {
    matches!(
        m,
        "GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "CONNECT" | "OPTIONS" | "TRACE" | "PATCH"
    )
}

/// `uri-host [ ":" port ]` (RFC 9110 §7.2): a reg-name, IPv4 or bracketed IP literal. Empty is
/// allowed (a target without an authority).
fn valid_host(v: &[u8]) -> bool {
    v.trim_ascii().iter().all(|&b| HOST_BYTES[usize::from(b)])
}

/// The bytes `valid_host` allows, one lookup each (a chain of comparisons per byte costs ~100
/// instructions on `127.0.0.1:3000`).
static HOST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let others = b"-._~!$&'()*+,;=%:[]";
    let mut i = 0;
    while i < others.len() {
        table[others[i] as usize] = true;
        i += 1;
    }
    table
};

/// `1*DIGIT`, limited by value, not by how many digits spell it: leading zeros are free, and a
/// number past `u64` saturates (it is over any body limit, so it gets 413).
fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

fn respond_route(
    out: &mut Vec<u8>,
    route: &Route<&str>,
    stamp: &Stamp,
    version: u8,
    after: After,
    head_only: bool,
) {
    let connection = match (after, version) {
        (After::Close, _) => Some("close"),
        (After::KeepAlive, 0) => Some("keep-alive"),
        (After::KeepAlive, _) => None,
    };
    let (status, body, content_type) = match route {
        Route::Empty if connection.is_none() => return out.extend_from_slice(&stamp.ok_empty),
        Route::Empty => (200, &b""[..], None),
        Route::User(id) => (200, id.as_bytes(), Some("text/plain")),
        Route::NotFound => (404, &b""[..], None),
    };
    respond(out, status, body, content_type, &stamp.date, connection);
    if head_only {
        out.truncate(out.len() - body.len());
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
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
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

/// The invariants any byte stream must keep, checked by the fuzz target (fuzz/) and by a
/// smoke run in the tests: feeding `data` whole or cut into pieces at `cuts` gives the same
/// bytes out and the same end; every response answers one request, in order; nothing is
/// answered after a refusal, and a refusal closes. Panics (with the reason) on a violation.
#[cfg(any(test, fuzzing))]
pub fn check_invariants(data: &[u8], cuts: &[usize]) {
    let stamp = Stamp::new("Mon, 30 Nov 2026 16:00:00 GMT".into());
    let limits = Limits { max_body: 1024 };
    // The worker's way: a buffer that keeps what was not consumed, fed as pieces arrive.
    let feed = |pieces: &mut dyn Iterator<Item = &[u8]>| {
        let (mut conn, mut buf, mut out) = (Connection::default(), Vec::new(), Vec::new());
        let (mut requests, mut after) = (0, After::KeepAlive);
        for piece in pieces {
            buf.extend_from_slice(piece);
            let p = conn.process(&buf, &mut out, &stamp, limits);
            assert!(p.consumed <= buf.len(), "consumed past the input");
            requests += p.requests;
            buf.drain(..p.consumed);
            if p.after == After::Close {
                after = After::Close;
                break;
            }
        }
        (out, requests, after)
    };
    let whole = feed(&mut std::iter::once(data));
    let mut rest = data;
    let mut pieces = Vec::new();
    for &cut in cuts.iter().filter(|&&c| c > 0) {
        if rest.is_empty() {
            break;
        }
        let (a, b) = rest.split_at(cut.min(rest.len()));
        pieces.push(a);
        rest = b;
    }
    pieces.push(rest);
    let split = feed(&mut pieces.into_iter());
    assert!(
        whole == split,
        "the answer depends on how the stream was split"
    );
    let (out, requests, after) = whole;
    // Walk the responses: statuses in order, bodies by Content-Length (HEAD answers carry
    // theirs in the header only, so lengths are trusted up to the next status line).
    let mut statuses = Vec::new();
    let mut at = 0;
    while at < out.len() {
        assert!(
            out[at..].starts_with(b"HTTP/1.1 "),
            "garbage between responses"
        );
        let head_end = at
            + out[at..]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("a whole head")
            + 4;
        let head = std::str::from_utf8(&out[at..head_end]).expect("ASCII head");
        let status: u16 = head[9..12].parse().expect("a status");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |v| v.parse().expect("a length"));
        at = head_end;
        if at < out.len() && !out[at..].starts_with(b"HTTP/1.1 ") {
            at += length;
        }
        statuses.push(status);
    }
    assert!(at == out.len(), "a truncated response");
    let finals: Vec<u16> = statuses.iter().copied().filter(|&s| s != 100).collect();
    let refusals = finals.iter().filter(|&&s| s >= 400 && s != 404).count();
    assert!(refusals <= 1, "more than one refusal: {finals:?}");
    if refusals == 1 {
        assert!(
            finals.last().is_some_and(|&s| s >= 400 && s != 404),
            "answered after a refusal: {finals:?}"
        );
        assert!(after == After::Close, "a refusal must close");
    }
    assert!(
        finals.len() as u64 == requests + refusals as u64,
        "{} final responses for {requests} requests and {refusals} refusals",
        finals.len()
    );
}

/// Seeded pseudo-random streams built from request fragments, each with the cuts to feed it
/// in: the smoke corpus the suite runs the fuzz target's checks over.
#[cfg(test)]
pub fn smoke_corpus(streams: usize) -> impl Iterator<Item = (Vec<u8>, Vec<usize>)> {
    const PIECES: [&[u8]; 30] = [
        b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /user/7 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"HEAD /user/77 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
        b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"3;x=y\r\nabc\r\n",
        b"0\r\n\r\n",
        b"0\r\nX: 1\r\n\r\n",
        b"\n",
        b"\r\n",
        b"\r",
        b"GET / HTTP/1.0\r\n\r\n",
        b"Connection: close\r\n",
        b"Expect: 100-continue\r\n",
        b"Content-Length: 2\r\n",
        b"Transfer-Encoding: gzip\r\n",
        b"Host: a\r\n",
        b"fffffffffffffffffff\r\n",
        b"GET http://h/user/1 HTTP/1.1\r\n",
        b"\x00",
        b"POST /user HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GARBAGE",
        b" ",
        b"1\r\nx\r\n",
        b"3 ;x\r\nabc\r\n",
        b"3 x\r\nabc\r\n",
        b"Transfer-Encoding: \r\n",
        b"Content-Length: 0000000000000000000002\r\n",
        b"0\r\nno-colon\r\n\r\n",
        b"3;ext\nabc\r\n",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        // xorshift64*: a reproducible stream of choices, not a statistics source.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    (0..streams).map(move |_| {
        let mut data = Vec::new();
        for _ in 0..(next() % 12) {
            data.extend_from_slice(PIECES[(next() % PIECES.len() as u64) as usize]);
        }
        let cuts: Vec<usize> = (0..(next() % 8)).map(|_| (next() % 64) as usize).collect();
        (data, cuts)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Mon, 30 Nov 2026 16:00:00 GMT";
    const LIMITS: Limits = Limits { max_body: 1024 };

    fn stamp() -> Stamp {
        Stamp::new(DATE.into())
    }

    fn run(input: &[u8]) -> (String, Progress) {
        let mut out = Vec::new();
        let p = Connection::default().process(input, &mut out, &stamp(), LIMITS);
        (String::from_utf8(out).unwrap(), p)
    }

    fn statuses(out: &str) -> Vec<&str> {
        out.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect()
    }

    #[test]
    fn routes() {
        let (out, p) = run(b"GET /user/42 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(p.requests, 1);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 16:00:00 GMT\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\n42"), "{out}");
        assert_eq!(
            statuses(&run(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").0),
            ["200"]
        );
        assert_eq!(
            statuses(&run(b"POST /user HTTP/1.1\r\nHost: t\r\n\r\n").0),
            ["200"]
        );
        for raw in [
            "GET /\u{3b4} ",
            "GET /user/\u{e9} ",
            "GET http://a/\u{3b4} ",
        ] {
            let req = format!("{raw}HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(
                answers(req.as_bytes()),
                (vec!["400".to_string()], After::Close),
                "{raw}"
            );
        }
        for miss in [
            "GET /user/ ",
            "GET /user/1/2 ",
            "GET /users ",
            "POST / ",
            "PUT /user ",
            "GET /user ",
            "DELETE /user/1 ",
            "OPTIONS * ",
        ] {
            let req = format!("{miss}HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(statuses(&run(req.as_bytes()).0), ["404"], "{miss}");
        }
        // A method no RFC defines: 501, and nothing after it is answered.
        for method in ["MKCOLA", "ANNOUNCE", "get", "BREW"] {
            let req =
                format!("{method} / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(
                answers(req.as_bytes()),
                (vec!["501".to_string()], After::Close),
                "{method}"
            );
        }
        // A framing fault is still a 400 whatever the method.
        assert_eq!(
            statuses(&run(b"BREW / HTTP/1.1\r\n\r\n").0),
            ["400"],
            "no Host"
        );
        assert_eq!(
            run(b"GET /user/7?x=1 HTTP/1.1\r\nHost: t\r\n\r\n")
                .0
                .rsplit("\r\n\r\n")
                .next(),
            Some("7")
        );
    }

    /// The prebuilt answer (`Stamp`) is byte for byte the one the general path writes, and is
    /// used only where its Connection header (none) is right.
    #[test]
    fn the_empty_answers_are_exact_on_every_version_and_close() {
        let date = "Date: Mon, 30 Nov 2026 16:00:00 GMT\r\n";
        let ok = |connection: &str| {
            format!("HTTP/1.1 200 OK\r\n{date}Content-Length: 0\r\n{connection}\r\n")
        };
        for (request, answer) in [
            ("GET / HTTP/1.1\r\nHost: t\r\n\r\n", ok("")),
            ("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", ok("")),
            ("POST /user HTTP/1.1\r\nHost: t\r\n\r\n", ok("")),
            (
                "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                ok("Connection: close\r\n"),
            ),
            (
                "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                ok("Connection: keep-alive\r\n"),
            ),
            ("GET / HTTP/1.0\r\n\r\n", ok("Connection: close\r\n")),
            (
                "POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
                ok(""),
            ),
        ] {
            assert_eq!(run(request.as_bytes()).0, answer, "{request:?}");
        }
        assert_eq!(stamp().ok_empty, ok("").as_bytes());
    }

    #[test]
    fn keep_alive_rules() {
        assert_eq!(
            run(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").1.after,
            After::KeepAlive
        );
        let (out, p) = run(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
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
            b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /user/9 HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!((p.requests, statuses(&out)), (2, vec!["200", "200"]));
        assert!(out.ends_with("9"));
        let input = b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
        let (out, p) = run(input);
        assert_eq!(
            (p.requests, statuses(&out).len(), p.consumed),
            (2, 2, input.len())
        );
    }

    #[test]
    fn a_request_split_anywhere_is_reassembled() {
        let input =
            b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabcGET /user/5 HTTP/1.1\r\nHost: t\r\n\r\n";
        for split in 1..input.len() {
            let mut conn = Connection::default();
            let mut buf = Vec::new();
            let mut out = Vec::new();
            let mut requests = 0;
            for piece in input.chunks(split) {
                buf.extend_from_slice(piece);
                let p = conn.process(&buf, &mut out, &stamp(), LIMITS);
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
            (b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n", "400"),
            (
                b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "400",
            ),
            (
                b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "400",
            ),
            (
                b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
                "501",
            ),
            (
                b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 99999\r\n\r\n",
                "413",
            ),
            (
                b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n",
                "413",
            ),
            (
                b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
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
        let big = format!(
            "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert_eq!(statuses(&run(big.as_bytes()).0), ["431"]);
        let partial = format!("GET / HTTP/1.1\r\nHost: t\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(statuses(&run(partial.as_bytes()).0), ["431"]);
        let many: String = (0..100).map(|i| format!("X{i}: 1\r\n")).collect();
        assert_eq!(
            statuses(&run(format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes()).0),
            ["431"]
        );
    }

    #[test]
    fn expect_continue_gets_an_interim_response_only_while_the_body_is_missing() {
        let mut conn = Connection::default();
        let mut out = Vec::new();
        let head =
            b"POST /user HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        let p = conn.process(head, &mut out, &stamp(), LIMITS);
        assert_eq!(p.requests, 0);
        assert_eq!(
            out, b"HTTP/1.1 100 Continue\r\n\r\n",
            "the final answer waits for the body"
        );
        let p = conn.process(b"hi", &mut out, &stamp(), LIMITS);
        assert_eq!(p.requests, 1);
        assert!(
            std::str::from_utf8(&out).unwrap().ends_with("\r\n\r\n")
                && out.windows(15).any(|w| w == b"HTTP/1.1 200 OK")
        );
        let (out, _) = run(b"POST /user HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    }

    /// The statuses a whole input gets, and how the connection ends.
    fn answers(input: &[u8]) -> (Vec<String>, After) {
        let (out, p) = run(input);
        (
            statuses(&out).into_iter().map(String::from).collect(),
            p.after,
        )
    }

    /// The class, not the case: in each of these heads, every one of its CRLFs turned into a
    /// bare LF (alone, and all at once) gets one 400 and a close — never the 200 of a head read
    /// by LF, never a second answer for what follows.
    #[test]
    fn a_bare_lf_anywhere_in_the_head_is_one_400_and_a_close() {
        let heads = [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /user/1 HTTP/1.1\r\nHost: a\r\nDummy: x\r\nContent-Length: 0\r\n\r\n",
            "POST /user HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a \t\r\nX:\r\nY: \r\n\r\n", // trailing whitespace, empty values
            "GET http://a/user/2 HTTP/1.1\r\nHost: a\r\n\r\n",
        ];
        let follow = "GET /user/hidden HTTP/1.1\r\nHost: a\r\n\r\n";
        for head in heads {
            let crlfs: Vec<usize> = head.match_indices("\r\n").map(|(i, _)| i).collect();
            let mut variants: Vec<String> = crlfs
                .iter()
                .map(|&i| format!("{}\n{}", &head[..i], &head[i + 2..]))
                .collect();
            variants.push(head.replace("\r\n", "\n"));
            for v in variants {
                let stream = format!("{v}abc{follow}");
                let (statuses, after) = answers(stream.as_bytes());
                assert_eq!(
                    (statuses, after),
                    (vec!["400".to_string()], After::Close),
                    "{v:?}"
                );
            }
            // The head as it is still answered (and the body skipped): the refusal is the LF's.
            let (statuses, _) = answers(format!("{head}abc{follow}").as_bytes());
            assert_eq!(
                statuses.first().map(String::as_str),
                Some("200"),
                "{head:?}"
            );
        }
        // The request the issue found hidden by a CRLF-only reader is not answered.
        let (statuses, after) = answers(b"GET / HTTP/1.1\r\nHost: a\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!((statuses, after), (vec!["400".to_string()], After::Close));
    }

    #[test]
    fn a_body_that_turns_out_malformed_gets_one_answer_not_two() {
        for body in [
            &b"zz\r\n"[..],               // bad size
            b"3\r\nabcX\r\n",             // no CRLF after the data
            b"fffffffffffffffffffff\r\n", // size overflow
            b"800\r\n",                   // over the body limit (1024)
            b"3;x\nabc\r\n0\r\n\r\n",     // bare LF in an extension
        ] {
            let mut input =
                b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            input.extend_from_slice(body);
            input.extend_from_slice(b"GET /user/1 HTTP/1.1\r\nHost: t\r\n\r\n");
            let (st, after) = answers(&input);
            assert_eq!(
                st.len(),
                1,
                "{}: {st:?}",
                String::from_utf8_lossy(body).escape_debug()
            );
            assert!(st[0] == "400" || st[0] == "413", "{st:?}");
            assert_eq!(after, After::Close);
        }
        // The answer waits for the whole body, then comes once.
        let mut conn = Connection::default();
        let mut out = Vec::new();
        let p = conn.process(
            b"POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhel",
            &mut out,
            &stamp(),
            LIMITS,
        );
        assert_eq!((p.requests, out.len()), (0, 0));
        assert!(conn.in_body());
        let p = conn.process(b"lo", &mut out, &stamp(), LIMITS);
        assert_eq!(
            (p.requests, statuses(std::str::from_utf8(&out).unwrap())),
            (1, vec!["200"])
        );
    }

    #[test]
    fn a_valid_chunk_size_with_many_leading_zeros_is_accepted() {
        let input = b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000000003\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
        assert_eq!(
            answers(input),
            (vec!["200".into(), "200".into()], After::KeepAlive)
        );
    }

    #[test]
    fn a_hidden_request_in_a_trailer_or_extension_is_never_answered() {
        // An LF-tolerant front end sees one request with a body; a lenient back end would find
        // a second one. Here: one refusal, then the connection closes.
        for smuggle in [
            &b"0\r\nX: 1\nGET /user/smuggled HTTP/1.1\r\nHost: t\r\n\r\n\r\n"[..],
            b"1;a\nGET /user/smuggled HTTP/1.1\r\nHost: t\r\n\r\nx\r\n0\r\n\r\n",
        ] {
            let mut input =
                b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            input.extend_from_slice(smuggle);
            let (out, p) = run(&input);
            assert!(!out.contains("smuggled"), "{out}");
            assert_eq!((statuses(&out), p.after), (vec!["400"], After::Close));
        }
    }

    #[test]
    fn framing_on_http_1_0_and_transfer_codings() {
        // Transfer-Encoding on 1.0 is faulty framing: refuse and close, even with keep-alive.
        let (st, after) = answers(b"POST /user HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.0\r\n\r\n");
        assert_eq!((st, after), (vec!["400".to_string()], After::Close));
        let te = |v: &str| {
            answers(
                format!(
                    "POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: {v}\r\n\r\n0\r\n\r\n"
                )
                .as_bytes(),
            )
            .0
        };
        assert_eq!(te("chunked"), ["200"]);
        assert_eq!(te("gzip"), ["501"]);
        assert_eq!(te("gzip, chunked"), ["501"]);
        assert_eq!(te("chunked, gzip"), ["400"]);
        assert_eq!(te("chunked, chunked"), ["400"]);
        // Two field lines form one list.
        let (st, _) = answers(b"POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
        assert_eq!(st, ["400"]);
    }

    #[test]
    fn expect_continue_from_http_1_0_is_ignored() {
        let (out, _) =
            run(b"POST /user HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
        assert!(!out.contains("100 Continue"), "{out}");
        let (out, _) =
            run(b"POST /user HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
        assert_eq!(statuses(&out), ["200"]);
    }

    #[test]
    fn head_gets_the_headers_of_get_and_no_body() {
        let (get, _) = run(b"GET /user/42 HTTP/1.1\r\nHost: t\r\n\r\n");
        let (head, p) = run(
            b"HEAD /user/42 HTTP/1.1\r\nHost: t\r\n\r\nGET /user/7 HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(p.requests, 2);
        let first = head.split_inclusive("\r\n\r\n").next().unwrap();
        assert_eq!(
            format!("{first}42"),
            get,
            "same headers, Content-Length 2 included, no body"
        );
        assert!(head.ends_with("\r\n\r\n7"), "{head}");
        assert_eq!(
            statuses(&run(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n").0),
            ["200"]
        );
        assert_eq!(
            statuses(&run(b"HEAD /user HTTP/1.1\r\nHost: t\r\n\r\n").0),
            ["404"]
        );
    }

    #[test]
    fn absolute_form_targets_are_routed_by_their_path() {
        let (out, _) = run(
            b"GET http://example.com:3000/user/5?x=1 HTTP/1.1\r\nHost: example.com:3000\r\n\r\n",
        );
        assert!(out.ends_with("\r\n\r\n5"), "{out}");
        assert_eq!(
            statuses(&run(b"GET HTTP://h HTTP/1.1\r\nHost: h\r\n\r\n").0),
            ["200"]
        );
        assert_eq!(
            statuses(&run(b"POST https://h/user HTTP/1.1\r\nHost: h\r\n\r\n").0),
            ["200"]
        );
        assert_eq!(origin_path("http://h?q"), "/");
        assert_eq!(origin_path("/user/1"), "/user/1");
    }

    #[test]
    fn host_is_required_once_and_valid() {
        for (input, want) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], "400"),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", "400"),
            (b"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", "400"),
            (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n\r\n", "200"),
            (b"GET / HTTP/1.1\r\nHost: [::1]:3000\r\n\r\n", "200"),
            (b"GET / HTTP/1.1\r\nHost:\r\n\r\n", "200"),
            (b"GET / HTTP/1.0\r\n\r\n", "200"),
        ] {
            let (st, after) = answers(input);
            assert_eq!(
                st,
                [want],
                "{}",
                String::from_utf8_lossy(input).escape_debug()
            );
            if want == "400" {
                assert_eq!(after, After::Close);
            }
        }
    }

    #[test]
    fn an_over_long_target_is_414_and_over_long_fields_431() {
        let long = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(answers(long.as_bytes()), (vec!["414".into()], After::Close));
        let partial = format!("GET /{}", "a".repeat(MAX_HEAD + 10));
        assert_eq!(answers(partial.as_bytes()).0, ["414"]);
        let fields = format!(
            "GET / HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert_eq!(answers(fields.as_bytes()).0, ["431"]);
    }

    /// The fuzz target's invariants over the smoke corpus (the fuzz campaign itself runs
    /// outside the suite: docs/reliability.md).
    #[test]
    fn fuzz_invariants_hold_on_a_smoke_corpus() {
        for (data, cuts) in smoke_corpus(3000) {
            check_invariants(&data, &cuts);
        }
    }
}
