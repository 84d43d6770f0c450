//! A strict reference for where each request of a byte stream ends, for the differential check
//! against the server's HTTP layer (smuggling is exactly a disagreement about that).
//!
//! Written apart from `http.rs` and `chunked.rs` and in another shape: it sees the whole stream
//! at once and decides on complete lines only, reading RFC 9112's grammar line by line, where
//! the server is an incremental state machine. It shares only `httparse` for the head's syntax
//! (the issue allows "httparse's own view"); what the fields mean for framing — Content-Length,
//! Transfer-Encoding, Host, Connection, the body and chunk limits — is its own.
//!
//! [`check_against_reference`] is the oracle: fed byte by byte, the server must answer exactly
//! the requests the reference completes, each at the byte the reference says it ends, and end
//! the same way. One asymmetry is allowed, because the reference waits for whole lines: where
//! the stream stops inside a request, the server may already have refused it.

use crate::http::{After, Connection, Limits, Stamp, MAX_HEAD};

/// Header fields httparse is given room for; more is a refusal (as in the server).
const MAX_FIELDS: usize = 64;

/// How the reference's reading of a stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The stream stopped between requests or inside one: more bytes are needed.
    Open,
    /// A request must be refused (and the connection closed).
    Refused,
    /// A request asked to close after its answer (`Connection: close`, HTTP/1.0).
    Closed,
}

/// The requests the reference completes — the offset just past each — and how it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framing {
    pub ends: Vec<usize>,
    pub outcome: Outcome,
}

/// What one request step found.
enum Step {
    /// The request ends at this offset; `close` after its answer.
    Complete {
        end: usize,
        close: bool,
    },
    Incomplete,
    Refuse,
}

/// Frames every request of `stream` under a body limit of `max_body` bytes.
pub fn frame(stream: &[u8], max_body: u64) -> Framing {
    let mut ends = Vec::new();
    let mut at = 0;
    loop {
        if at == stream.len() {
            return Framing {
                ends,
                outcome: Outcome::Open,
            };
        }
        match request(stream, at, max_body) {
            Step::Complete { end, close } => {
                ends.push(end);
                if close {
                    return Framing {
                        ends,
                        outcome: Outcome::Closed,
                    };
                }
                at = end;
            }
            Step::Incomplete => {
                return Framing {
                    ends,
                    outcome: Outcome::Open,
                }
            }
            Step::Refuse => {
                return Framing {
                    ends,
                    outcome: Outcome::Refused,
                }
            }
        }
    }
}

/// A field's name, lowercased, and its value.
type Field<'a> = (String, &'a [u8]);

/// The body framing a head declares (RFC 9112 §6.3), or `None` for a head to refuse.
enum Declared {
    Length(u64),
    Chunked,
}

fn request(stream: &[u8], at: usize, max_body: u64) -> Step {
    let rest = &stream[at..];
    let mut headers = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(rest) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) if rest.len() <= MAX_HEAD => return Step::Incomplete,
        _ => return Step::Refuse,
    };
    // Every line of the head, leading empty lines included, ends in CRLF (RFC 9112 §2.2 lets
    // a recipient take a bare LF; this project does not, in the head as in chunk lines).
    let mut line_at = 0;
    while line_at < head_len {
        match crlf_line(&rest[..head_len], line_at) {
            Ok(Some((_, next))) => line_at = next,
            _ => return Step::Refuse,
        }
    }
    // The request-target, read off the request line itself: ASCII only (RFC 3986).
    let line = &rest[rest
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count()..];
    let target = line.split(|&b| b == b' ').nth(1).unwrap_or(b"");
    if !target.is_ascii() {
        return Step::Refuse;
    }
    let version = req.version.unwrap_or(1);
    let fields: Vec<Field> = req
        .headers
        .iter()
        .map(|h| (h.name.to_ascii_lowercase(), h.value))
        .collect();
    let Some(declared) = declared_body(&fields, version) else {
        return Step::Refuse;
    };
    if !host_acceptable(&fields, version) {
        return Step::Refuse;
    }
    // A method outside RFC 9110 §9 and RFC 5789 is refused (501): nothing after it is read.
    const KNOWN: [&[u8]; 9] = [
        b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"CONNECT", b"OPTIONS", b"TRACE", b"PATCH",
    ];
    let method = line.split(|&b| b == b' ').next().unwrap_or(b"");
    if !KNOWN.contains(&method) {
        return Step::Refuse;
    }
    let tokens = list(&fields, "connection");
    let close = tokens.iter().any(|t| t.eq_ignore_ascii_case(b"close"))
        || (version == 0 && !tokens.iter().any(|t| t.eq_ignore_ascii_case(b"keep-alive")));
    let body_start = at + head_len;
    let end = match declared {
        Declared::Length(n) if n > max_body => return Step::Refuse,
        Declared::Length(n) => match body_start.checked_add(n as usize) {
            Some(end) if end <= stream.len() => end,
            _ => return Step::Incomplete,
        },
        Declared::Chunked => match chunked_end(stream, body_start, max_body) {
            Ok(Some(end)) => end,
            Ok(None) => return Step::Incomplete,
            Err(()) => return Step::Refuse,
        },
    };
    Step::Complete { end, close }
}

/// Every element of every field named `name` (a `#list`, RFC 9110 §5.6.1), empty ones dropped.
fn list<'a>(fields: &[Field<'a>], name: &str) -> Vec<&'a [u8]> {
    fields
        .iter()
        .filter(|(n, _)| n == name)
        .flat_map(|(_, v)| v.split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|e| !e.is_empty())
        .collect()
}

fn declared_body(fields: &[Field], version: u8) -> Option<Declared> {
    let has_te = fields.iter().any(|(n, _)| n == "transfer-encoding");
    let lengths: Vec<&[u8]> = fields
        .iter()
        .filter(|(n, _)| n == "content-length")
        .map(|(_, v)| v.trim_ascii())
        .collect();
    if has_te {
        // Only a lone `chunked` lets a server find the end; on HTTP/1.0, or beside a
        // Content-Length, Transfer-Encoding is faulty framing (RFC 9112 §6.1, §6.3).
        let codings = list(fields, "transfer-encoding");
        let only_chunked = codings.len() == 1 && codings[0].eq_ignore_ascii_case(b"chunked");
        return (only_chunked && version == 1 && lengths.is_empty()).then_some(Declared::Chunked);
    }
    let mut value = None;
    for v in lengths {
        // `1*DIGIT`, limited by value: leading zeros are the same number.
        if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let digits = &v[v.iter().position(|&d| d != b'0').unwrap_or(v.len())..];
        let n: u64 = if digits.is_empty() {
            0
        } else {
            std::str::from_utf8(digits).ok()?.parse().ok()?
        };
        if value.is_some_and(|prev| prev != n) {
            return None;
        }
        value = Some(n);
    }
    Some(Declared::Length(value.unwrap_or(0)))
}

/// RFC 9112 §3.2: HTTP/1.1 needs exactly one Host, no version more than one, and its value is
/// a `uri-host [":" port]` (RFC 3986 reg-name, IPv4 or IP-literal characters).
fn host_acceptable(fields: &[Field], version: u8) -> bool {
    let hosts: Vec<&[u8]> = fields
        .iter()
        .filter(|(n, _)| n == "host")
        .map(|(_, v)| *v)
        .collect();
    let count_ok = match version {
        1 => hosts.len() == 1,
        _ => hosts.len() <= 1,
    };
    const UNRESERVED_EXTRA: &[u8] = b"-._~";
    const SUB_DELIMS: &[u8] = b"!$&'()*+,;=";
    const AUTHORITY_EXTRA: &[u8] = b"%:[]";
    count_ok
        && hosts.iter().all(|v| {
            v.trim_ascii().iter().all(|b| {
                b.is_ascii_alphanumeric()
                    || UNRESERVED_EXTRA.contains(b)
                    || SUB_DELIMS.contains(b)
                    || AUTHORITY_EXTRA.contains(b)
            })
        })
}

/// The line starting at `at`: its content and the offset past its CRLF. `Ok(None)`: no LF yet.
/// A bare LF, or a CR anywhere but just before the LF, is malformed.
fn crlf_line(stream: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, ()> {
    let Some(lf) = stream[at..].iter().position(|&b| b == b'\n') else {
        return Ok(None);
    };
    let line = &stream[at..at + lf];
    match line.split_last() {
        Some((b'\r', content)) if !content.contains(&b'\r') => Ok(Some((content, at + lf + 1))),
        _ => Err(()),
    }
}

/// `VCHAR / obs-text / SP / HTAB`: what a field value or an extension may hold.
fn text(b: u8) -> bool {
    b == b'\t' || b == b' ' || b.is_ascii_graphic() || b >= 0x80
}

fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`, the name a
/// token, the value a token or a quoted-string (RFC 9112 §7.1.1, RFC 9110 §5.6.4); `ext`
/// starts at its first `;`.
fn chunk_ext(ext: &[u8]) -> bool {
    let bws = |at: &mut usize| {
        while matches!(ext.get(*at), Some(b' ' | b'\t')) {
            *at += 1;
        }
    };
    let token = |at: &mut usize| {
        let start = *at;
        while ext.get(*at).is_some_and(|&b| tchar(b)) {
            *at += 1;
        }
        *at > start
    };
    let mut at = 0;
    while at < ext.len() {
        bws(&mut at);
        if ext.get(at) != Some(&b';') {
            return false;
        }
        at += 1;
        bws(&mut at);
        if !token(&mut at) {
            return false;
        }
        let before_eq = at;
        bws(&mut at);
        if ext.get(at) != Some(&b'=') {
            // No value: what follows is the next extension (or the end), after its BWS.
            at = before_eq;
            continue;
        }
        at += 1;
        bws(&mut at);
        if ext.get(at) == Some(&b'"') {
            at += 1;
            loop {
                match ext.get(at) {
                    Some(b'"') => break,
                    Some(b'\\') if ext.get(at + 1).is_some_and(|&b| text(b)) => at += 2,
                    Some(&b) if text(b) && b != b'\\' => at += 1,
                    _ => return false,
                }
            }
            at += 1;
        } else if !token(&mut at) {
            return false;
        }
    }
    true
}

/// `chunk-size [BWS ";" ext-text]`: the size, or `None` for a malformed line. Extensions are
/// not interpreted (a recipient ignores them), only kept to text bytes.
fn chunk_size(line: &[u8]) -> Option<u128> {
    let hex = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if hex == 0 {
        return None;
    }
    let rest = &line[hex..];
    let after_bws = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    let extension_ok = match after_bws.first() {
        None => rest.is_empty(),
        Some(b';') => chunk_ext(after_bws),
        Some(_) => false,
    };
    if !extension_ok {
        return None;
    }
    let digits = &line[..hex];
    let significant = &digits[digits.iter().position(|&d| d != b'0').unwrap_or(hex)..];
    match significant.len() {
        0 => Some(0),
        // More than 128 bits: past any body limit, whatever it spells.
        n if n > 32 => Some(u128::MAX),
        _ => u128::from_str_radix(std::str::from_utf8(significant).ok()?, 16).ok(),
    }
}

/// `field-name ":" OWS field-value OWS` with a token name: a trailer line.
fn trailer_ok(line: &[u8]) -> bool {
    let name = line.iter().take_while(|&&b| tchar(b)).count();
    name > 0 && line.get(name) == Some(&b':') && line[name + 1..].iter().all(|&b| text(b))
}

/// Where a chunked body starting at `at` ends (past its final CRLF): `Ok(None)` when the stream
/// stops first, `Err` when it is malformed or its chunks add up past `max_body`.
fn chunked_end(stream: &[u8], mut at: usize, max_body: u64) -> Result<Option<usize>, ()> {
    let mut total: u128 = 0;
    loop {
        let Some((line, next)) = crlf_line(stream, at)? else {
            return Ok(None);
        };
        let size = chunk_size(line).ok_or(())?;
        total = total.saturating_add(size);
        if total > u128::from(max_body) {
            return Err(());
        }
        at = next;
        if size == 0 {
            break;
        }
        let data_end = at + size as usize;
        match stream.get(data_end..data_end + 2) {
            None => return Ok(None),
            Some(b"\r\n") => at = data_end + 2,
            Some(_) => return Err(()),
        }
    }
    // trailer-section: field lines, then an empty line.
    loop {
        let Some((line, next)) = crlf_line(stream, at)? else {
            return Ok(None);
        };
        at = next;
        if line.is_empty() {
            return Ok(Some(at));
        }
        if !trailer_ok(line) {
            return Err(());
        }
    }
}

/// The server's reading of `stream`, fed one byte at a time as a worker would get it: the offset
/// at which each answer was produced, and how it ended.
pub fn served(stream: &[u8], limits: Limits) -> Framing {
    let stamp = Stamp::new("Mon, 30 Nov 2026 16:00:00 GMT".into());
    let (mut conn, mut buf, mut out) = (Connection::default(), Vec::new(), Vec::new());
    let mut ends = Vec::new();
    for (i, &b) in stream.iter().enumerate() {
        buf.push(b);
        let written = out.len();
        let p = conn.process(&buf, &mut out, &stamp, limits);
        buf.drain(..p.consumed);
        ends.extend(std::iter::repeat_n(i + 1, p.requests as usize));
        if p.after == After::Close {
            let finals = final_statuses(&out[written..]);
            let refused = finals.len() as u64 > p.requests;
            return Framing {
                ends,
                outcome: if refused {
                    Outcome::Refused
                } else {
                    Outcome::Closed
                },
            };
        }
    }
    Framing {
        ends,
        outcome: Outcome::Open,
    }
}

/// The status codes of the final (non-100) responses in `out`.
fn final_statuses(out: &[u8]) -> Vec<u16> {
    out.windows(9)
        .enumerate()
        .filter(|(i, w)| *w == b"HTTP/1.1 " && (*i == 0 || out[..*i].ends_with(b"\r\n")))
        .filter_map(|(i, _)| {
            std::str::from_utf8(out.get(i + 9..i + 12)?)
                .ok()?
                .parse()
                .ok()
        })
        .filter(|&s| s != 100)
        .collect()
}

/// Panics, naming both readings, unless the server answers exactly the requests the reference
/// completes, each where the reference says it ends, and ends the same way (or, where the
/// stream stops inside a request, has already refused it).
pub fn check_against_reference(stream: &[u8]) {
    let limits = Limits { max_body: 1024 };
    let reference = frame(stream, limits.max_body);
    let server = served(stream, limits);
    let agree = server.ends == reference.ends
        && (server.outcome == reference.outcome
            || (reference.outcome == Outcome::Open && server.outcome == Outcome::Refused));
    assert!(
        agree,
        "framing disagreement on {:?}:\n  reference {reference:?}\n  server    {server:?}",
        String::from_utf8_lossy(stream)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const POST_CHUNKED: &str =
        "POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    const GET: &str = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";

    #[test]
    fn the_reference_frames_what_it_should() {
        let two = format!("{GET}{GET}");
        assert_eq!(
            frame(two.as_bytes(), 1024),
            Framing {
                ends: vec![GET.len(), 2 * GET.len()],
                outcome: Outcome::Open
            }
        );
        let chunked = format!("{POST_CHUNKED}3;a=b\r\nabc\r\n0\r\nX-T: 1\r\n\r\n{GET}");
        let f = frame(chunked.as_bytes(), 1024);
        assert_eq!(f.ends, [chunked.len() - GET.len(), chunked.len()]);
        for refused in [
            format!("{POST_CHUNKED}3;a\nabc\r\n0\r\n\r\n"), // bare LF in an extension
            format!("{POST_CHUNKED}3 x\r\nabc\r\n0\r\n\r\n"), // BWS then not ';'
            format!("{POST_CHUNKED}0\r\nno colon\r\n\r\n"), // a trailer that is no field
            format!("{POST_CHUNKED}2;\r\nab\r\n0\r\n\r\n"), // an extension with no name
            format!("{POST_CHUNKED}5;a=\"abc;b\r\nabcde\r\n0\r\n\r\n"), // an open quote
            format!("{POST_CHUNKED}401\r\n"),               // over the body limit
            "POST /user HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".into(),
            "POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\n\r\n".into(),
            "POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 1, 1\r\n\r\nx".into(),
            "GET / HTTP/1.1\r\n\r\n".into(),
            "GET / HTTP/1.1\r\nHost: t\nX: 1\r\n\r\n".into(), // a bare LF in the head
            "GET / HTTP/1.1\nHost: t\n\n".into(),             // every line LF only
            "\nGET / HTTP/1.1\r\nHost: t\r\n\r\n".into(),     // a bare LF before it
            "GET /\u{3b4} HTTP/1.1\r\nHost: t\r\n\r\n".into(), // a byte over 0x7F in the target
        ] {
            assert_eq!(
                frame(refused.as_bytes(), 1024).outcome,
                Outcome::Refused,
                "{refused:?}"
            );
        }
        let zeros =
            "POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 00000000000000000000003\r\n\r\nabc";
        assert_eq!(frame(zeros.as_bytes(), 1024).ends, [zeros.len()]);
    }

    #[test]
    fn a_disagreement_is_caught() {
        // The oracle is not vacuous: a server that took a bare LF as a line end would
        // answer the hidden request; its reading differs from the reference's.
        let hidden = format!("{POST_CHUNKED}3;a\nabc\r\n0\r\n\r\n{GET}");
        let reference = frame(hidden.as_bytes(), 1024);
        let lenient = Framing {
            ends: vec![hidden.len() - GET.len(), hidden.len()],
            outcome: Outcome::Open,
        };
        assert_ne!(reference, lenient);
        assert_eq!(reference.outcome, Outcome::Refused);
    }

    #[test]
    fn known_smuggling_vectors_agree_with_the_reference() {
        for stream in [
            format!("{POST_CHUNKED}3;a\nabc\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}0\r\nX-T: 1\n{GET}\r\n\r\n"),
            format!("POST /user HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}0000000000000000003\r\nabc\r\n0\r\n\r\n{GET}"),
            format!("POST /user HTTP/1.1\r\nHost: t\r\nContent-Length: 0000000000000000000003\r\n\r\nabc{GET}"),
            format!("POST /user HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: ,\r\nContent-Length: 3\r\n\r\nabc{GET}"),
            format!("{POST_CHUNKED}3 junk\r\nabc\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}3\t\r\nabc\r\n0\r\n\r\n{GET}"), // found by the fuzzer
            format!("{POST_CHUNKED}0\r\nnot-a-field\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}3\r\nabc\r\n0\r\n\r\n{GET}{GET}"),
            format!("{POST_CHUNKED}2;\r\nab\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}5;a=\"abc;b\r\nabcde\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}3 ; a = \"x\\\"y\" ; b\r\nabc\r\n0\r\n\r\n{GET}"),
            // BWS after the last extension, before the CR: the grammar has none.
            format!("{POST_CHUNKED}3;a \r\nabc\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}3;a=b\t\r\nabc\r\n0\r\n\r\n{GET}"),
            format!("{POST_CHUNKED}3;a=\"b\" \r\nabc\r\n0\r\n\r\n{GET}"),
            // A bare LF ends a header line for httparse, not for a CRLF-only proxy in front.
            "GET / HTTP/1.1\r\nHost: a\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: a\r\n\r\n".into(),
            "GET / HTTP/1.1\nHost: t\n\nGET / HTTP/1.1\nHost: t\n\n".into(),
            format!("\r\n{GET}"), // one empty CRLF line before the request is allowed
            // A method no RFC defines is refused, with its body and all that follows.
            format!("MKCOLA /user HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc{GET}"),
            format!("get / HTTP/1.1\r\nHost: t\r\n\r\n{GET}"),
        ] {
            check_against_reference(stream.as_bytes());
        }
    }

    #[test]
    fn the_server_agrees_with_the_reference_on_the_smoke_corpus() {
        for (stream, _) in crate::http::smoke_corpus(3000) {
            check_against_reference(&stream);
        }
    }
}
