//! The driver's own HTTP/1.1 response reader. Written apart from the server's request parsing on
//! purpose: a bug shared by both sides would cancel out and hide.

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadResponse {
    #[error("malformed status line")]
    StatusLine,
    #[error("malformed header")]
    Header,
    #[error("response head larger than 64 KiB")]
    HeadTooLarge,
    #[error("malformed chunked body")]
    Chunk,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    /// Waiting for a chunk-size line.
    ChunkSize,
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// Trailer lines after the last chunk, up to the empty line.
    Trailers,
    /// No length given: the body runs to the end of the connection.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More bytes are needed; `used` of those given were consumed.
    Incomplete { used: usize },
    /// A whole response ended after `used` bytes.
    Complete {
        used: usize,
        status: u16,
        close: bool,
    },
}

#[derive(Debug, Default)]
pub struct ResponseReader {
    /// `None` while reading a head.
    body: Option<Body>,
    status: u16,
    close: bool,
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    memchr::memmem::find(b, b"\r\n")
}

impl ResponseReader {
    /// True between responses (nothing of the next one read yet).
    pub fn idle(&self) -> bool {
        self.body.is_none()
    }

    /// The connection ended: completes a response whose body runs to the close.
    pub fn finish_on_close(&mut self) -> Option<u16> {
        if self.body == Some(Body::UntilClose) {
            self.body = None;
            return Some(self.status);
        }
        None
    }

    /// Consumes from `input` (the unconsumed bytes received so far, in order).
    pub fn feed(&mut self, input: &[u8]) -> Result<Step, BadResponse> {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            let Some(body) = self.body else {
                match self.read_head(rest)? {
                    None => return Ok(Step::Incomplete { used: pos }),
                    Some(n) => {
                        pos += n;
                        continue;
                    }
                }
            };
            let (used, next) = match body {
                Body::Length(0) => (0, None),
                Body::Length(n) => {
                    let take = n.min(rest.len() as u64);
                    (take as usize, Some(Body::Length(n - take)))
                }
                Body::ChunkSize => match find_crlf(rest) {
                    None if rest.len() > 1024 => return Err(BadResponse::Chunk),
                    None => return Ok(Step::Incomplete { used: pos }),
                    Some(end) => {
                        let line = &rest[..end];
                        let hex = line.split(|&b| b == b';').next().unwrap_or(b"");
                        let hex = std::str::from_utf8(hex)
                            .map_err(|_| BadResponse::Chunk)?
                            .trim();
                        let size = u64::from_str_radix(hex, 16).map_err(|_| BadResponse::Chunk)?;
                        let next = if size == 0 {
                            Body::Trailers
                        } else {
                            Body::ChunkData(size)
                        };
                        (end + 2, Some(next))
                    }
                },
                Body::ChunkData(n) => {
                    let take = n.min(rest.len() as u64);
                    let next = if take == n {
                        Body::ChunkEnd
                    } else {
                        Body::ChunkData(n - take)
                    };
                    (take as usize, Some(next))
                }
                Body::ChunkEnd => {
                    if rest.len() < 2 {
                        return Ok(Step::Incomplete { used: pos });
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(BadResponse::Chunk);
                    }
                    (2, Some(Body::ChunkSize))
                }
                Body::Trailers => match find_crlf(rest) {
                    None => return Ok(Step::Incomplete { used: pos }),
                    Some(0) => (2, None),
                    Some(end) => (end + 2, Some(Body::Trailers)),
                },
                Body::UntilClose => (rest.len(), Some(Body::UntilClose)),
            };
            pos += used;
            match next {
                None => {
                    self.body = None;
                    return Ok(Step::Complete {
                        used: pos,
                        status: self.status,
                        close: self.close,
                    });
                }
                Some(b) => {
                    self.body = Some(b);
                    if pos == input.len() {
                        if b == Body::Length(0) {
                            continue; // complete with what we have
                        }
                        return Ok(Step::Incomplete { used: pos });
                    }
                }
            }
        }
    }

    /// Reads a whole head from `rest`, returning its length, or `None` if it is not all there.
    ///
    /// Byte-level on purpose: this runs once per response on the driver's hot path, where
    /// UTF-8 checks, substring searches and lower-casing copies cost more than the kernel's
    /// own receive (measured with `perf record -e cpu-clock`, see docs/methodology.md).
    fn read_head(&mut self, rest: &[u8]) -> Result<Option<usize>, BadResponse> {
        let Some(end) = find_head_end(rest) else {
            if rest.len() > MAX_HEAD {
                return Err(BadResponse::HeadTooLarge);
            }
            return Ok(None);
        };
        let head = &rest[..end];
        let mut lines = Lines(head);
        let status_line = lines.next().unwrap_or(b"");
        // "HTTP/1.x SSS[ reason]"
        if status_line.len() < 12
            || !status_line.starts_with(b"HTTP/1.")
            || status_line[8] != b' '
            || status_line.get(12).is_some_and(|&b| b != b' ')
        {
            return Err(BadResponse::StatusLine);
        }
        let status = parse_decimal(&status_line[9..12])
            .filter(|s| (100..1000).contains(s))
            .ok_or(BadResponse::StatusLine)? as u16;
        let (mut length, mut chunked) = (None, false);
        let mut close = status_line[7] == b'0';
        for line in lines {
            let colon = memchr::memchr(b':', line).ok_or(BadResponse::Header)?;
            let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
            // Only three names matter; their lengths differ, so one compare decides.
            match name.len() {
                14 if name.eq_ignore_ascii_case(b"content-length") => {
                    length = Some(parse_decimal(value).ok_or(BadResponse::Header)?);
                }
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                    chunked = ends_with_ignore_case(value, b"chunked");
                }
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    if contains_ignore_case(value, b"close") {
                        close = true;
                    } else if contains_ignore_case(value, b"keep-alive") {
                        close = false;
                    }
                }
                _ => {}
            }
        }
        let used = end + 4;
        if (100..200).contains(&status) {
            return Ok(Some(used)); // interim response: the real one follows
        }
        self.status = status;
        self.close = close;
        self.body = Some(if status == 204 || status == 304 {
            Body::Length(0)
        } else if chunked {
            Body::ChunkSize
        } else if let Some(n) = length {
            Body::Length(n)
        } else {
            self.close = true;
            Body::UntilClose
        });
        Ok(Some(used))
    }
}

/// The lines of a head, without their CRLF (or bare LF).
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let (line, rest) = match memchr::memchr(b'\n', self.0) {
            Some(i) => (&self.0[..i], &self.0[i + 1..]),
            None => (self.0, &b""[..]),
        };
        self.0 = rest;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

/// Where the head's closing CRLFCRLF starts.
fn find_head_end(b: &[u8]) -> Option<usize> {
    memchr::memmem::find(b, b"\r\n\r\n")
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

/// A non-empty run of ASCII digits (at most 19, so it cannot overflow).
fn parse_decimal(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    b.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0'))
    })
}

fn ends_with_ignore_case(b: &[u8], suffix: &[u8]) -> bool {
    b.len() >= suffix.len() && b[b.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

fn contains_ignore_case(b: &[u8], needle: &[u8]) -> bool {
    b.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` split every `split` bytes, as a connection buffer would accumulate it.
    fn responses(input: &[u8], split: usize) -> Vec<(u16, bool)> {
        let mut r = ResponseReader::default();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(split) {
            buf.extend_from_slice(piece);
            loop {
                match r.feed(&buf).unwrap() {
                    Step::Incomplete { used } => {
                        buf.drain(..used);
                        break;
                    }
                    Step::Complete {
                        used,
                        status,
                        close,
                    } => {
                        buf.drain(..used);
                        out.push((status, close));
                    }
                }
            }
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        out
    }

    #[test]
    fn lengths_chunks_interim_and_close_however_split() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello\
HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n\
HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\nT: 1\r\n\r\n\
HTTP/1.1 204 No Content\r\n\r\n\
HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
        let want = vec![
            (200, false),
            (404, false),
            (200, false),
            (204, false),
            (200, true),
        ];
        for split in 1..=input.len() {
            assert_eq!(responses(input, split), want, "split {split}");
        }
    }

    #[test]
    fn header_names_any_case_values_trimmed() {
        let input = b"HTTP/1.0 200 OK\r\nconnection:  Keep-Alive \r\nCONTENT-LENGTH:3\r\n\r\nabc\
HTTP/1.1 200\r\nTransfer-Encoding: gzip, Chunked\r\nX-Length: 9\r\n\r\n1\r\nz\r\n0\r\n\r\n\
HTTP/1.1 500 Oops\r\nConnection: CLOSE\r\nContent-Length: 0\r\n\r\n";
        for split in 1..=input.len() {
            assert_eq!(
                responses(input, split),
                vec![(200, false), (200, false), (500, true)],
                "split {split}"
            );
        }
    }

    /// Each input alone is refused.
    fn assert_all_rejected(inputs: &[&[u8]]) {
        for bad in inputs {
            assert!(
                ResponseReader::default().feed(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn bad_status_lines_and_lengths_are_errors() {
        assert_all_rejected(&[
            &b"HTTP/1.1 20 OK\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
        ]);
    }

    #[test]
    fn body_until_close() {
        let mut r = ResponseReader::default();
        let step = r.feed(b"HTTP/1.0 200 OK\r\n\r\nsome body").unwrap();
        assert_eq!(step, Step::Incomplete { used: 28 });
        assert_eq!(r.finish_on_close(), Some(200));
    }

    #[test]
    fn garbage_is_an_error() {
        assert_all_rejected(&[
            &b"SMTP 220 hi\r\n\r\n"[..],
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
        ]);
        let mut r = ResponseReader::default();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            Err(BadResponse::Chunk)
        );
    }
}
