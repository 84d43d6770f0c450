//! Buffers kept from one connection for the next. A connection per request would otherwise
//! allocate its receive buffer and grow its send buffer for every request, and free both at
//! its close: callgrind put glibc's allocator at about a third of the server's user-space
//! instructions per fresh connection (docs/performance.md, "Instructions per request").
//! Bounded: a worker keeps at most `LIMIT` buffers of each kind, none over `MAX_KEPT` bytes
//! (a large body's buffer goes back to the allocator), so an idle server holds little.

/// Buffers of each kind a worker keeps.
const LIMIT: usize = 256;
/// The largest buffer kept (bytes of capacity).
const MAX_KEPT: usize = 16 * 1024;

#[derive(Default)]
pub struct Pool {
    free: Vec<Vec<u8>>,
}

impl Pool {
    /// An empty buffer with room for at least `capacity` bytes: a kept one when there is.
    pub fn take(&mut self, capacity: usize) -> Vec<u8> {
        match self.free.pop() {
            Some(mut buf) => {
                buf.reserve(capacity);
                buf
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// Keeps `buf` (emptied) for a later [`Pool::take`], unless the pool is full or `buf` is
    /// one grown large or never allocated.
    pub fn give(&mut self, mut buf: Vec<u8>) {
        if self.free.len() < LIMIT && (1..=MAX_KEPT).contains(&buf.capacity()) {
            buf.clear();
            self.free.push(buf);
        }
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_the_next_one_taken_emptied() {
        let mut pool = Pool::default();
        let mut buf = pool.take(2048);
        assert!(buf.capacity() >= 2048);
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let at = buf.as_ptr();
        pool.give(buf);
        let again = pool.take(2048);
        assert_eq!(
            (again.as_ptr(), again.len()),
            (at, 0),
            "the same allocation, empty"
        );
        // A kept buffer smaller than asked grows to it.
        pool.give(Vec::with_capacity(16));
        assert!(pool.take(4096).capacity() >= 4096);
    }

    #[test]
    fn the_pool_is_bounded_and_keeps_no_large_or_empty_buffer() {
        let mut pool = Pool::default();
        pool.give(Vec::new());
        pool.give(Vec::with_capacity(MAX_KEPT + 1));
        assert_eq!(pool.kept(), 0);
        for _ in 0..LIMIT + 10 {
            pool.give(Vec::with_capacity(64));
        }
        assert_eq!(pool.kept(), LIMIT);
    }
}
