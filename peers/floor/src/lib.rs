//! What the two floors share (peers/floor on epoll, peers/uring-floor on io_uring): finding
//! where request heads end, the only reading of the bytes either does.

/// Counts the request heads that end in `data`, carrying a partial `\r\n\r\n` across reads.
pub fn heads_ending(matched: &mut u8, data: &[u8]) -> usize {
    const END: &[u8; 4] = b"\r\n\r\n";
    let mut heads = 0;
    for &b in data {
        *matched = if b == END[*matched as usize] {
            *matched + 1
        } else if b == b'\r' {
            1
        } else {
            0
        };
        if *matched == 4 {
            heads += 1;
            *matched = 0;
        }
    }
    heads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_counted_across_reads_and_pipelines() {
        let mut m = 0;
        assert_eq!(
            heads_ending(
                &mut m,
                b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\n\r\n"
            ),
            2
        );
        assert_eq!(heads_ending(&mut m, b"GET / HTTP/1.1\r\nHost: a\r"), 0);
        assert_eq!(heads_ending(&mut m, b"\n\r"), 0);
        assert_eq!(heads_ending(&mut m, b"\n"), 1);
        assert_eq!(
            heads_ending(&mut m, b"\r\r\n\r\n"),
            1,
            "a CR restarts the match"
        );
    }
}
