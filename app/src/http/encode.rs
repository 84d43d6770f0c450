//! Writing answers: the once-a-second stamp, a route's response, a refusal.

use super::route::Route;
use super::{After, Status, Version};

/// A response decided from a request head: what to send and how the connection goes on.
#[derive(Debug)]
pub(super) struct Answer {
    pub route: Route<Box<str>>,
    pub version: Version,
    pub after: After,
    /// `HEAD`: the headers of the `GET`, no body.
    pub head_only: bool,
}

impl Answer {
    pub fn write(&self, out: &mut Vec<u8>, stamp: &Stamp) {
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
    pub(super) date: String,
    pub(super) ok_empty: Vec<u8>,
}

impl Stamp {
    /// `date`: an HTTP-date (RFC 9110 §5.6.7), the Date header's value.
    pub fn new(date: String) -> Stamp {
        let mut ok_empty = Vec::new();
        respond(&mut ok_empty, Status::Ok, b"", None, &date, None);
        Stamp { date, ok_empty }
    }
}

pub(super) fn respond_route(
    out: &mut Vec<u8>,
    route: &Route<&str>,
    stamp: &Stamp,
    version: Version,
    after: After,
    head_only: bool,
) {
    let connection = match (after, version) {
        (After::Close, _) => Some("close"),
        (After::KeepAlive, Version::Http10) => Some("keep-alive"),
        (After::KeepAlive, Version::Http11) => None,
    };
    let (status, body, content_type) = match route {
        Route::Empty if connection.is_none() => return out.extend_from_slice(&stamp.ok_empty),
        Route::Empty => (Status::Ok, &b""[..], None),
        Route::User(id) => (Status::Ok, id.as_bytes(), Some("text/plain")),
        Route::NotFound => (Status::NotFound, &b""[..], None),
    };
    respond(out, status, body, content_type, &stamp.date, connection);
    if head_only {
        out.truncate(out.len() - body.len());
    }
}

/// A refusal: the connection closes after it.
pub(super) fn respond_error(out: &mut Vec<u8>, status: Status, date: &str) {
    respond(out, status, b"", None, date, Some("close"));
}

fn respond(
    out: &mut Vec<u8>,
    status: Status,
    body: &[u8],
    content_type: Option<&str>,
    date: &str,
    connection: Option<&str>,
) {
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.line().as_bytes());
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
