//! The invariants any byte stream must keep — the fuzz target's oracle (fuzz/) — and the
//! seeded smoke corpus the suite runs them over.

use super::{After, Connection, Limits, Stamp};

/// The invariants any byte stream must keep, checked by the fuzz target (fuzz/) and by a
/// smoke run in the tests: feeding `data` whole or cut into pieces at `cuts` gives the same
/// bytes out and the same end; every response answers one request, in order; nothing is
/// answered after a refusal, and a refusal closes. Panics (with the reason) on a violation.
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
