//! Process-wide per-fd registration hints for the epoll backend.
//!
//! One 8-byte word per fd: the generation of the connection that owns the fd number now, and how
//! that connection is registered in its reactor's epoll set. It is only ever a hint: a wrong
//! "registered" costs an ENOENT and a retry with ADD, a wrong "unregistered" costs an EEXIST and
//! a retry with MOD. The one hint acted on without a syscall, "registered edge-triggered", is
//! trusted only for the same generation, and every accepted or registered fd starts a new one.
//!
//! Storage grows in chunks of 4096 fds, allocated the first time an fd in that range is touched
//! and kept for the life of the process (fd numbers are reused, so are their chunks).

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

const CHUNK_FDS: usize = 4096;
const CHUNKS: usize = 1024; // fds 0 .. 4 Mi; beyond that every call takes the safe path.

/// Bytes of hint state per fd, in allocated chunks.
pub const BYTES_PER_FD: usize = std::mem::size_of::<AtomicU64>();
const _: () = assert!(
    BYTES_PER_FD <= 16,
    "the design allows at most 16 bytes per fd"
);

static TABLE: [AtomicPtr<AtomicU64>; CHUNKS] = [const { AtomicPtr::new(ptr::null_mut()) }; CHUNKS];
static CHUNKS_ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// How an fd is registered in its reactor's epoll set, as far as the reactor knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Registration {
    None,
    /// Registered with EPOLLONESHOT (armed or already fired).
    Oneshot,
    /// Registered once, edge-triggered, for the RX receive path.
    Rx,
}

/// One fd's hint: the owning connection's generation and its registration.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Hint {
    pub generation: u32,
    pub registration: Registration,
}

impl Hint {
    fn pack(self) -> u64 {
        let reg = match self.registration {
            Registration::None => 0,
            Registration::Oneshot => 1,
            Registration::Rx => 2,
        };
        (u64::from(self.generation) << 32) | reg
    }

    fn unpack(word: u64) -> Hint {
        let registration = match word & 3 {
            1 => Registration::Oneshot,
            2 => Registration::Rx,
            _ => Registration::None,
        };
        Hint {
            generation: (word >> 32) as u32,
            registration,
        }
    }
}

fn slot(fd: i32, allocate: bool) -> Option<&'static AtomicU64> {
    let fd = usize::try_from(fd).ok()?;
    let (chunk, index) = (fd / CHUNK_FDS, fd % CHUNK_FDS);
    let head = TABLE.get(chunk)?;
    let mut base = head.load(Ordering::Acquire);
    if base.is_null() {
        if !allocate {
            return None;
        }
        let fresh: Box<[AtomicU64]> = (0..CHUNK_FDS).map(|_| AtomicU64::new(0)).collect();
        let fresh = Box::into_raw(fresh) as *mut AtomicU64;
        match head.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                CHUNKS_ALLOCATED.fetch_add(1, Ordering::Relaxed);
                base = fresh;
            }
            Err(winner) => {
                // SAFETY: `fresh` came from Box::into_raw of a CHUNK_FDS slice just above and
                // was never published, so we still own it.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, CHUNK_FDS)) });
                base = winner;
            }
        }
    }
    // SAFETY: a published chunk is a CHUNK_FDS-long allocation that is never freed, and
    // `index < CHUNK_FDS`.
    Some(unsafe { &*base.add(index) })
}

/// The current hint for `fd` (an untouched fd reads as generation 0, unregistered).
pub fn get(fd: i32) -> Hint {
    slot(fd, false).map_or(Hint::unpack(0), |s| Hint::unpack(s.load(Ordering::Relaxed)))
}

/// Starts a new connection generation on `fd`: unregistered. Returns the new generation.
pub fn reset(fd: i32) -> u32 {
    let Some(s) = slot(fd, true) else { return 0 };
    let generation = Hint::unpack(s.load(Ordering::Relaxed))
        .generation
        .wrapping_add(1);
    s.store(
        Hint {
            generation,
            registration: Registration::None,
        }
        .pack(),
        Ordering::Relaxed,
    );
    generation
}

/// Records how the connection of `generation` registered `fd`.
pub fn set(fd: i32, generation: u32, registration: Registration) {
    if let Some(s) = slot(fd, true) {
        s.store(
            Hint {
                generation,
                registration,
            }
            .pack(),
            Ordering::Relaxed,
        );
    }
}

/// The registration to act on for the connection of `generation`: another generation's hint
/// says nothing about this connection (except that the fd may still sit in the epoll set, which
/// the EEXIST fallback handles).
pub fn registration(fd: i32, generation: u32) -> Registration {
    let hint = get(fd);
    if hint.generation == generation {
        hint.registration
    } else {
        Registration::None
    }
}

/// Heap bytes held by the table (chunks only; the chunk directory is a static of 8 KiB).
pub fn bytes_allocated() -> usize {
    CHUNKS_ALLOCATED.load(Ordering::Relaxed) * CHUNK_FDS * BYTES_PER_FD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips() {
        for registration in [Registration::None, Registration::Oneshot, Registration::Rx] {
            for generation in [0, 1, u32::MAX] {
                let h = Hint {
                    generation,
                    registration,
                };
                assert_eq!(Hint::unpack(h.pack()), h);
            }
        }
    }

    #[test]
    fn reset_starts_a_new_unregistered_generation() {
        let fd = 3_000_123; // far from fds this test process really uses
        let g0 = reset(fd);
        set(fd, g0, Registration::Rx);
        assert_eq!(registration(fd, g0), Registration::Rx);
        let g1 = reset(fd);
        assert_ne!(g0, g1);
        assert_eq!(registration(fd, g1), Registration::None);
        // The old generation's connection no longer trusts anything here.
        assert_eq!(registration(fd, g0), Registration::None);
    }

    #[test]
    fn chunks_are_lazy_and_fds_out_of_range_are_safe() {
        let fd = 2_000_000; // chunk 488: touched by no other test
        assert!(slot(fd, false).is_none());
        let before = bytes_allocated();
        reset(fd);
        assert!(slot(fd, false).is_some());
        assert!(bytes_allocated() >= before + CHUNK_FDS * BYTES_PER_FD);
        // Out of range: no storage, reads as unregistered, writes are ignored.
        assert_eq!(reset(i32::MAX), 0);
        assert_eq!(get(i32::MAX).registration, Registration::None);
        assert_eq!(get(-1).registration, Registration::None);
    }

    #[test]
    fn racing_first_touches_allocate_one_chunk() {
        let fd = 1_000_000; // chunk 244
        let handles: Vec<_> = (0..8)
            .map(|i| std::thread::spawn(move || set(fd + i, 1, Registration::Oneshot)))
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for i in 0..8 {
            assert_eq!(
                get(fd + i).registration,
                Registration::Oneshot,
                "fd {}",
                fd + i
            );
        }
    }
}
