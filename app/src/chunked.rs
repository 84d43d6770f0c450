//! Skips a chunked request body (RFC 9112 §7.1) without keeping it: the contract ignores
//! bodies, but the next pipelined request starts right after this one's last chunk.
//!
//! Strict where a lenient reader would disagree with another about where the body ends (the
//! root of request smuggling): every line ends in CRLF — a bare LF, or a CR not followed by LF,
//! anywhere in a size line, an extension or a trailer is malformed — and control bytes other
//! than HTAB are refused in extensions and trailers (RFC 9112 §7.1.1, RFC 9110 §5.5); after a
//! size only the CR or whitespace and `;` may follow; an extension is held to its grammar (a
//! token name, and a token or a complete quoted-string value); and a trailer line is
//! `token ":" value`. Sizes are limited by value (the body limit), not by how many digits
//! spell them.

#[derive(Debug, PartialEq, Eq)]
pub enum ChunkError {
    Malformed,
    TooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size; `digits` counts them.
    Size,
    /// Whitespace after the size (BWS): only more of it or the `;` of an extension may follow
    /// (`chunk-ext = *( BWS ";" … )`: whitespace alone before the CR is no extension).
    SizeBws,
    /// After an extension's `;`: BWS, then its name (RFC 9112 §7.1.1:
    /// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`).
    ExtBeforeName,
    /// The name, a token.
    ExtName,
    /// BWS after the name: `=` or another `;` may follow (the grammar has no BWS before the CR).
    ExtAfterName,
    /// After `=`: BWS, then a token or a quoted-string.
    ExtBeforeValue,
    ExtToken,
    /// Inside a quoted-string; `ExtQuotedPair` just after its backslash.
    ExtQuoted,
    ExtQuotedPair,
    /// Just past a quoted-string's closing quote.
    ExtQuoteClosed,
    /// BWS after a value: another `;` may follow.
    ExtAfterValue,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// Start of a trailer line, or of the final empty line.
    TrailerStart,
    /// A trailer field's name (a token) up to its colon.
    TrailerName,
    TrailerValue,
    TrailerLf,
    FinalLf,
    Done,
}

#[derive(Debug)]
pub struct Chunked {
    state: State,
    size: u64,
    digits: u32,
    total: u64,
    limit: u64,
}

impl Chunked {
    /// A body whose chunk data may total at most `limit` bytes.
    pub fn new(limit: u64) -> Chunked {
        Chunked {
            state: State::Size,
            size: 0,
            digits: 0,
            total: 0,
            limit,
        }
    }

    /// Consumes body bytes from `input`. Returns how many it used and whether the body ended
    /// (then the rest of `input` belongs to the next request).
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            self.state = match self.state {
                State::Size => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        let digit = (b as char).to_digit(16).expect("hex") as u64;
                        self.digits += 1;
                        // Leading zeros are free; a value past the body limit is too large.
                        self.size = match self.size.checked_mul(16).map(|v| v + digit) {
                            Some(v) if v <= self.limit.saturating_sub(self.total) => v,
                            _ => return Err(ChunkError::TooLarge),
                        };
                        State::Size
                    }
                    _ if self.digits == 0 => return Err(ChunkError::Malformed),
                    b';' => State::ExtBeforeName,
                    b' ' | b'\t' => State::SizeBws,
                    b'\r' => State::SizeLf,
                    _ => return Err(ChunkError::Malformed),
                },
                State::SizeBws => match b {
                    b' ' | b'\t' => State::SizeBws,
                    b';' => State::ExtBeforeName,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtBeforeName => match b {
                    b' ' | b'\t' => State::ExtBeforeName,
                    _ if tchar(b) => State::ExtName,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtName => match b {
                    _ if tchar(b) => State::ExtName,
                    b' ' | b'\t' => State::ExtAfterName,
                    b'=' => State::ExtBeforeValue,
                    b';' => State::ExtBeforeName,
                    b'\r' => State::SizeLf,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtAfterName => match b {
                    b' ' | b'\t' => State::ExtAfterName,
                    b'=' => State::ExtBeforeValue,
                    b';' => State::ExtBeforeName,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtBeforeValue => match b {
                    b' ' | b'\t' => State::ExtBeforeValue,
                    b'"' => State::ExtQuoted,
                    _ if tchar(b) => State::ExtToken,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtToken => match b {
                    _ if tchar(b) => State::ExtToken,
                    b' ' | b'\t' => State::ExtAfterValue,
                    b';' => State::ExtBeforeName,
                    b'\r' => State::SizeLf,
                    _ => return Err(ChunkError::Malformed),
                },
                // qdtext: HTAB, SP, 0x21, 0x23-0x5B, 0x5D-0x7E, obs-text (RFC 9110 §5.6.4).
                State::ExtQuoted => match b {
                    b'"' => State::ExtQuoteClosed,
                    b'\\' => State::ExtQuotedPair,
                    b'\t' | b' '..=b'~' | 0x80..=0xff => State::ExtQuoted,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtQuotedPair => match b {
                    b'\t' | b' '..=b'~' | 0x80..=0xff => State::ExtQuoted,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtQuoteClosed => match b {
                    b' ' | b'\t' => State::ExtAfterValue,
                    b';' => State::ExtBeforeName,
                    b'\r' => State::SizeLf,
                    _ => return Err(ChunkError::Malformed),
                },
                State::ExtAfterValue => match b {
                    b' ' | b'\t' => State::ExtAfterValue,
                    b';' => State::ExtBeforeName,
                    _ => return Err(ChunkError::Malformed),
                },
                State::SizeLf => match b {
                    b'\n' if self.size == 0 => State::TrailerStart,
                    b'\n' => {
                        self.total += self.size;
                        if self.total > self.limit {
                            return Err(ChunkError::TooLarge);
                        }
                        State::Data
                    }
                    _ => return Err(ChunkError::Malformed),
                },
                State::Data => {
                    let take = self.size.min((input.len() - i) as u64);
                    self.size -= take;
                    i += take as usize;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                    continue;
                }
                State::DataCr => match b {
                    b'\r' => State::DataLf,
                    _ => return Err(ChunkError::Malformed),
                },
                State::DataLf => match b {
                    b'\n' => {
                        self.digits = 0;
                        State::Size
                    }
                    _ => return Err(ChunkError::Malformed),
                },
                State::TrailerStart => match b {
                    b'\r' => State::FinalLf,
                    // A trailer field line starts with a name: no folding, no control bytes.
                    _ if tchar(b) => State::TrailerName,
                    _ => return Err(ChunkError::Malformed),
                },
                State::TrailerName => match b {
                    b':' => State::TrailerValue,
                    _ if tchar(b) => State::TrailerName,
                    _ => return Err(ChunkError::Malformed),
                },
                State::TrailerValue => match b {
                    b'\r' => State::TrailerLf,
                    b'\t' | b' '..=b'~' | 0x80..=0xff => State::TrailerValue,
                    _ => return Err(ChunkError::Malformed),
                },
                State::TrailerLf => match b {
                    b'\n' => State::TrailerStart,
                    _ => return Err(ChunkError::Malformed),
                },
                State::FinalLf => match b {
                    b'\n' => State::Done,
                    _ => return Err(ChunkError::Malformed),
                },
                State::Done => unreachable!("left the loop"),
            };
            i += 1;
            if self.state == State::Done {
                return Ok((i, true));
            }
        }
        Ok((i, false))
    }
}

/// RFC 9110 §5.6.2: the bytes of a token (a field name).
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip_all(body: &[u8], split: usize) -> Result<usize, ChunkError> {
        let mut c = Chunked::new(1 << 20);
        let mut pos = 0;
        for piece in body.chunks(split) {
            let (used, done) = c.feed(piece)?;
            pos += used;
            if done {
                return Ok(pos);
            }
            assert_eq!(used, piece.len());
        }
        Err(ChunkError::Malformed) // never ended
    }

    #[test]
    fn ends_exactly_after_the_last_chunk_however_it_is_split() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let mut with_next = body.to_vec();
        with_next.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        for split in 1..=with_next.len() {
            let mut c = Chunked::new(1 << 20);
            let mut pos = 0;
            'outer: for piece in with_next.chunks(split) {
                let (used, done) = c.feed(piece).unwrap();
                pos += used;
                if done {
                    break 'outer;
                }
            }
            assert_eq!(pos, body.len(), "split {split}");
        }
    }

    #[test]
    fn empty_body_and_errors() {
        assert_eq!(skip_all(b"0\r\n\r\n", 1), Ok(5));
        assert_eq!(skip_all(b"x\r\n", 3), Err(ChunkError::Malformed));
        assert_eq!(skip_all(b"\r\n", 3), Err(ChunkError::Malformed));
        assert_eq!(skip_all(b"3\r\nabcX", 8), Err(ChunkError::Malformed));
        assert_eq!(
            skip_all(b"ffffffffffffffff\r\n", 30),
            Err(ChunkError::TooLarge)
        );
        assert_eq!(
            skip_all(b"fffffffffffffffffffffffffffff\r\n", 7),
            Err(ChunkError::TooLarge),
            "no overflow, however many digits"
        );
        let mut c = Chunked::new(10);
        assert_eq!(c.feed(b"b\r\n"), Err(ChunkError::TooLarge));
        // The limit is on the total of the chunks, not on each.
        let mut c = Chunked::new(10);
        assert_eq!(c.feed(b"6\r\nabcdef\r\n"), Ok((11, false)));
        assert_eq!(c.feed(b"5\r\n"), Err(ChunkError::TooLarge));
    }

    #[test]
    fn sizes_are_limited_by_value_not_by_digits() {
        let body = b"00000000000000000003\r\nabc\r\n0000000000000000000000\r\n\r\n";
        assert_eq!(skip_all(body, 5), Ok(body.len()));
    }

    #[test]
    fn extensions_are_held_to_their_grammar() {
        for good in [
            &b"3;a\r\nabc\r\n0\r\n\r\n"[..],
            b"3;a=b\r\nabc\r\n0\r\n\r\n",
            b"3 ; a = b ; c\r\nabc\r\n0\r\n\r\n",
            b"3;a=\"\"\r\nabc\r\n0\r\n\r\n",
            b"3;a=\"x;y \\\" z\"\r\nabc\r\n0\r\n\r\n",
            b"3;a=\"\xce\xb4\";b\r\nabc\r\n0\r\n\r\n",
        ] {
            let show = String::from_utf8_lossy(good).escape_debug().to_string();
            assert_eq!(skip_all(good, 1), Ok(good.len()), "{show}");
        }
        for bad in [
            &b"2;\r\nab\r\n0\r\n\r\n"[..],          // `;` and no name
            b"3;a=\"abc;b\r\nabc\r\n0\r\n\r\n",     // an unterminated quoted-string
            b"3;a=\r\nabc\r\n0\r\n\r\n",            // `=` and no value
            b"3;a b\r\nabc\r\n0\r\n\r\n",           // two names without `;`
            b"3;a=b c\r\nabc\r\n0\r\n\r\n",         // two values
            b"3;a=\"x\"y\r\nabc\r\n0\r\n\r\n",      // bytes after the closing quote
            b"3;a/b\r\nabc\r\n0\r\n\r\n",           // a name that is no token
            b"3;a=b/c\r\nabc\r\n0\r\n\r\n",         // a value that is no token
            b"3;;a\r\nabc\r\n0\r\n\r\n",            // an empty extension
            b"3;a=\"x\\\x01\"\r\nabc\r\n0\r\n\r\n", // a control byte quoted
        ] {
            let show = String::from_utf8_lossy(bad).escape_debug().to_string();
            assert_eq!(skip_all(bad, 1), Err(ChunkError::Malformed), "{show}");
        }
    }

    #[test]
    fn bare_lf_and_control_bytes_in_chunk_lines_and_trailers_are_refused() {
        for bad in [
            &b"3;ext\nabc\r\n0\r\n\r\n"[..],        // bare LF inside an extension
            b"3;a=\x01\r\nabc\r\n0\r\n\r\n",        // control byte in an extension
            b"3\nabc\r\n0\r\n\r\n",                 // bare LF ends a size line
            b"3\r\nabc\n0\r\n\r\n",                 // bare LF after data
            b"0\r\nX-T: 1\nGET / HTTP/1.1\r\n\r\n", // bare LF inside a trailer
            b"0\r\nX-T: a\x00b\r\n\r\n",            // NUL in a trailer value
            b"0\r\n X-T: folded\r\n\r\n",           // obsolete line folding
            b"0\r\n\n",                             // bare LF as the final line
            b"0\r\nX-T: 1\r\r\n\r\n",               // CR not followed by LF
            b"3 x\r\nabc\r\n0\r\n\r\n",             // BWS after a size, then not ';'
            b"3\t\r\nabc\r\n0\r\n\r\n",             // BWS after a size, then the CR
            b"0\r\nno-colon\r\n\r\n",               // a trailer line that is no field
            b"0\r\nX T: 1\r\n\r\n",                 // a space inside a trailer name
        ] {
            assert_eq!(
                skip_all(bad, 1),
                Err(ChunkError::Malformed),
                "{}",
                String::from_utf8_lossy(bad).escape_debug()
            );
        }
    }
}
