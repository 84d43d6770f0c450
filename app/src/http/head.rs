//! What the contract needs from a request head, and the checks that refuse one: framing that
//! a front end could read otherwise (smuggling), limits, unknown codings and methods.

use super::{Status, Version, MAX_HEAD};

/// Header fields parsed per request; more is 431.
pub(super) const MAX_HEADERS: usize = 64;

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
pub(super) fn lines_end_in_crlf(head: &[u8], req: &httparse::Request) -> bool {
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
pub(super) fn too_large(head: &[u8]) -> Status {
    let line = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    if line > MAX_HEAD {
        Status::UriTooLong
    } else {
        Status::HeaderFieldsTooLarge
    }
}

pub(super) enum BodyKind {
    Length(u64),
    Chunked,
}

/// What the contract needs from a request head.
pub(super) struct Head {
    pub version: Version,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub body: BodyKind,
}

impl Head {
    /// Reads the head; `Err(status)` for a request that must be refused (and the connection
    /// closed: after a framing doubt nothing that follows can be trusted).
    pub fn read(req: &httparse::Request) -> Result<Head, Status> {
        // RFC 3986 has no bytes above 0x7F in a URI: a peer that percent-encodes them sees
        // another path than one that routes them raw.
        if !req.path.unwrap_or("").is_ascii() {
            return Err(Status::BadRequest);
        }
        let version = match req.version {
            Some(0) => Version::Http10,
            _ => Version::Http11,
        };
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
                let n = parse_length(h.value).ok_or(Status::BadRequest)?;
                // Repeated, differing lengths are a smuggling vector: refuse.
                if length.is_some_and(|l| l != n) {
                    return Err(Status::BadRequest);
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
                        return Err(Status::BadRequest);
                    }
                    codings += 1;
                    chunked_last = coding.eq_ignore_ascii_case(b"chunked");
                    if !chunked_last {
                        // A coding this server does not implement (RFC 9112 §6.1).
                        return Err(Status::NotImplemented);
                    }
                }
            } else if name.eq_ignore_ascii_case("expect") {
                expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
            } else if name.eq_ignore_ascii_case("host") {
                hosts += 1;
                if !valid_host(h.value) {
                    return Err(Status::BadRequest);
                }
            }
        }
        // RFC 9112 §3.2: no Host on HTTP/1.1, or more than one anywhere: 400.
        if hosts > 1 || (version == Version::Http11 && hosts == 0) {
            return Err(Status::BadRequest);
        }
        if te_fields > 0 && codings == 0 {
            // A Transfer-Encoding with no coding: framing a front end may read otherwise.
            return Err(Status::BadRequest);
        }
        let chunked = codings > 0;
        if chunked && length.is_some() {
            return Err(Status::BadRequest); // RFC 9112 §6.3: a server may reject this, and should
        }
        if chunked && version == Version::Http10 {
            return Err(Status::BadRequest); // RFC 9112 §6.1: Transfer-Encoding on 1.0 is faulty framing
        }
        // RFC 9110 §9.1: an origin server SHOULD answer 501 to a method it does not
        // recognise. Refused (and closed) like the other 501, last, so that a framing fault
        // is still a 400. A standard method outside the contract is a 404 (`route`).
        if !standard_method(req.method.unwrap_or("")) {
            return Err(Status::NotImplemented);
        }
        let keep_alive = !close && (version == Version::Http11 || keep_alive_token);
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
