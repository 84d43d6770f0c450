//! The-benchmarker contract over HTTP/1.x: turns the bytes a connection received into the
//! responses it owes, in order. Pure (no I/O), so the worker stays a thin loop around it.

//!
//! Along hyper's seams: this file is the framing state machine (where a request ends, what is
//! owed, when the connection closes); [`head`] reads and checks a request head, [`route`]
//! picks the contract's route, [`encode`] writes answers, and [`invariants`] is the fuzz
//! target's oracle.

mod encode;
mod head;
#[cfg(any(test, fuzzing))]
mod invariants;
mod route;

use crate::chunked::{ChunkError, Chunked};
use encode::{respond_error, respond_route, Answer};
use head::{lines_end_in_crlf, too_large, BodyKind, Head, MAX_HEADERS};
use route::{origin_path, route, Route};

pub use encode::Stamp;
#[cfg(any(test, fuzzing))]
pub use invariants::check_invariants;
#[cfg(test)]
pub use invariants::smoke_corpus;

/// Request head larger than this is answered 431 (a request line larger than this, 414).
pub const MAX_HEAD: usize = 8 * 1024;

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

/// The statuses this server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    BadRequest,
    NotFound,
    ContentTooLarge,
    UriTooLong,
    HeaderFieldsTooLarge,
    NotImplemented,
}

impl Status {
    /// The status line's code and reason phrase.
    fn line(self) -> &'static str {
        match self {
            Status::Ok => "200 OK",
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::ContentTooLarge => "413 Content Too Large",
            Status::UriTooLong => "414 URI Too Long",
            Status::HeaderFieldsTooLarge => "431 Request Header Fields Too Large",
            Status::NotImplemented => "501 Not Implemented",
        }
    }
}

/// The request's HTTP version (httparse reads only 1.0 and 1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Http10,
    Http11,
}

/// How far one step of [`Connection::process`] got.
enum Step {
    /// Nothing owed is left unanswered: go on with the input.
    Next,
    /// The input ends inside a request: offer the rest again with more.
    More,
    /// The client's last request was answered: the rest of the input is discarded.
    Last,
    /// Refused with this status; the connection closes.
    Refuse(Status),
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
        let (mut pos, mut requests) = (0, 0);
        loop {
            let step = match self.finish_body(input, &mut pos, out, stamp, &mut requests) {
                Step::Next if pos == input.len() => Step::More,
                Step::Next => self.next_request(input, &mut pos, out, stamp, limits, &mut requests),
                step => step,
            };
            let (consumed, after, ends_clean) = match step {
                Step::Next => continue,
                Step::More => (pos, After::KeepAlive, false),
                Step::Last => (input.len(), After::Close, pos == input.len()),
                Step::Refuse(status) => {
                    respond_error(out, status, &stamp.date);
                    (input.len(), After::Close, false)
                }
            };
            return Progress {
                consumed,
                requests,
                after,
                ends_clean,
            };
        }
    }

    /// Skips what arrived of the body being received, and answers its request once it ends.
    fn finish_body(
        &mut self,
        input: &[u8],
        pos: &mut usize,
        out: &mut Vec<u8>,
        stamp: &Stamp,
        requests: &mut u64,
    ) -> Step {
        match &mut self.body {
            Body::None => return Step::Next,
            Body::Length { left, .. } => {
                let take = (*left).min((input.len() - *pos) as u64);
                *left -= take;
                *pos += take as usize;
                if *left > 0 {
                    return Step::More;
                }
            }
            Body::Chunked { skipper, .. } => match skipper.feed(&input[*pos..]) {
                Ok((used, finished)) => {
                    *pos += used;
                    if !finished {
                        return Step::More;
                    }
                }
                Err(ChunkError::Malformed) => return Step::Refuse(Status::BadRequest),
                Err(ChunkError::TooLarge) => return Step::Refuse(Status::ContentTooLarge),
            },
        }
        let (Body::Length { answer, .. } | Body::Chunked { answer, .. }) =
            std::mem::replace(&mut self.body, Body::None)
        else {
            unreachable!("a body was being skipped")
        };
        answer.write(out, stamp);
        *requests += 1;
        match answer.after {
            After::Close => Step::Last,
            After::KeepAlive => Step::Next,
        }
    }

    /// Reads the request head at `pos` and answers it — at once without a body, or once its
    /// body has been skipped ([`Connection::finish_body`]).
    fn next_request(
        &mut self,
        input: &[u8],
        pos: &mut usize,
        out: &mut Vec<u8>,
        stamp: &Stamp,
        limits: Limits,
        requests: &mut u64,
    ) -> Step {
        // Uninitialised: filling 64 empty headers before each parse costs ~140
        // instructions a request, a quarter of parsing a one-header head (callgrind,
        // docs/performance.md).
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        let rest = &input[*pos..];
        let head_len = match req.parse_with_uninit_headers(rest, &mut headers) {
            Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
            Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => {
                return Step::Refuse(too_large(rest));
            }
            Ok(httparse::Status::Partial) if rest.len() > MAX_HEAD => {
                return Step::Refuse(too_large(rest));
            }
            Ok(httparse::Status::Partial) => return Step::More,
            Err(_) => return Step::Refuse(Status::BadRequest),
        };
        if !lines_end_in_crlf(&rest[..head_len], &req) {
            return Step::Refuse(Status::BadRequest);
        }
        let head = match Head::read(&req) {
            Ok(head) => head,
            Err(status) => return Step::Refuse(status),
        };
        *pos += head_len;
        let body_len = match head.body {
            BodyKind::Length(n) => n,
            BodyKind::Chunked => 0,
        };
        if body_len > limits.max_body {
            return Step::Refuse(Status::ContentTooLarge);
        }
        let body_present = match head.body {
            BodyKind::Length(n) => (input.len() - *pos) as u64 >= n,
            BodyKind::Chunked => false,
        };
        // RFC 9110 §10.1.1: an HTTP/1.0 client cannot understand an interim response.
        if head.expect_continue && head.version == Version::Http11 && !body_present {
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
                *requests += 1;
                match after {
                    After::Close => Step::Last,
                    After::KeepAlive => Step::Next,
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
                Step::Next
            }
        }
    }
}

#[cfg(test)]
mod tests;
