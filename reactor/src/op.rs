//! What both backends keep of a connection's operations: whether one may start (the refusals,
//! written once) and a send under way.

use crate::{RefuseReason, Refused};

/// The operations a connection runs one at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Recv,
    Send,
}

/// A backend's per-connection record, as far as the refusals go.
pub(crate) trait InFlight {
    fn recv_armed(&self) -> bool;
    fn send_in_flight(&self) -> bool;
}

/// The connection, if it can start `op` now — open, and that operation not already under way
/// — else the refusal, with the buffer back: the one place both backends refuse.
pub(crate) fn admit<C: InFlight>(
    conn: Option<C>,
    op: Op,
    buf: Vec<u8>,
) -> Result<(C, Vec<u8>), Refused> {
    let reason = match (conn, op) {
        (None, _) => RefuseReason::Stale,
        (Some(c), Op::Recv) if c.recv_armed() => RefuseReason::RecvArmed,
        (Some(c), Op::Send) if c.send_in_flight() => RefuseReason::SendInFlight,
        (Some(c), _) => return Ok((c, buf)),
    };
    Err(Refused { reason, buf })
}

/// A send under way: the caller's buffer and how much of it the socket has taken. The bytes
/// live in the buffer's heap allocation, which stays put when a `Sending` moves.
pub(crate) struct Sending {
    buf: Vec<u8>,
    written: usize,
}

impl Sending {
    pub fn new(buf: Vec<u8>) -> Sending {
        Sending { buf, written: 0 }
    }

    /// What the socket has not taken yet.
    pub fn rest(&self) -> &[u8] {
        &self.buf[self.written..]
    }

    /// Records `n` more bytes written; true once every byte is.
    pub fn advance(&mut self, n: usize) -> bool {
        self.written = (self.written + n).min(self.buf.len());
        self.is_done()
    }

    pub fn is_done(&self) -> bool {
        self.written == self.buf.len()
    }

    /// The caller's buffer, for the completion.
    pub fn into_buf(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_done_when_every_byte_is_written_in_however_many_parts() {
        let mut s = Sending::new(b"hello world".to_vec());
        assert!(!s.is_done());
        assert!(!s.advance(5));
        assert_eq!(s.rest(), b" world");
        assert!(s.advance(6));
        assert_eq!(s.rest(), b"");
        assert_eq!(s.into_buf(), b"hello world");
        assert!(Sending::new(Vec::new()).is_done(), "nothing to write");
    }

    struct Record {
        recv: bool,
        send: bool,
    }
    impl InFlight for &mut Record {
        fn recv_armed(&self) -> bool {
            self.recv
        }
        fn send_in_flight(&self) -> bool {
            self.send
        }
    }

    #[test]
    fn a_refusal_names_its_reason_and_gives_the_buffer_back() {
        let reason = |conn: Option<&mut Record>, op| {
            let e = admit(conn, op, vec![7]).err().expect("refused");
            assert_eq!(e.buf, [7]);
            e.reason
        };
        let mut busy = Record {
            recv: true,
            send: true,
        };
        assert_eq!(reason(None, Op::Recv), RefuseReason::Stale);
        assert_eq!(reason(Some(&mut busy), Op::Recv), RefuseReason::RecvArmed);
        assert_eq!(
            reason(Some(&mut busy), Op::Send),
            RefuseReason::SendInFlight
        );
        let mut idle = Record {
            recv: false,
            send: false,
        };
        assert!(admit(Some(&mut idle), Op::Send, vec![]).is_ok());
    }
}
