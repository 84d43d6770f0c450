//! A provided-buffer ring (`IORING_REGISTER_PBUF_RING`, kernel 5.19): the kernel takes one
//! buffer from it for each multishot receive completion and names it in the CQE; the reactor
//! copies the bytes out and gives the buffer straight back.
//!
//! Memory invariant (the reason for the unsafe blocks): the ring of entries and the buffers
//! behind it are allocated here, never move, and outlive the registration — `Uring`'s `Drop`
//! unregisters the group before this value is dropped. The kernel only reads entries between
//! the head it keeps and the tail published here, and only writes into a buffer it took from
//! the ring; a buffer is written to the ring again only after its completion was reaped.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::Submitter;

use crate::sys::{Errno, Sys};

pub(crate) struct BufRing {
    entries: NonNull<BufRingEntry>,
    layout: Layout,
    /// `count * buf_size` bytes, written by the kernel: reached only through raw pointers, so
    /// no Rust reference ever covers a buffer the kernel may be writing.
    bufs: NonNull<u8>,
    bufs_layout: Layout,
    buf_size: usize,
    /// A power of two.
    count: u16,
    /// Our copy of the tail; the kernel sees it after [`BufRing::publish`].
    tail: u16,
    pub group: u16,
}

impl BufRing {
    /// Allocates `count` (a power of two) buffers of `buf_size` bytes and registers them as
    /// buffer group `group`.
    pub fn new(
        sys: &mut Sys,
        submitter: &Submitter<'_>,
        count: u16,
        buf_size: usize,
        group: u16,
    ) -> Result<BufRing, Errno> {
        assert!(count.is_power_of_two() && buf_size > 0);
        // The kernel wants the ring page-aligned.
        let layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .expect("valid layout");
        // SAFETY: the layout has a non-zero size (count ≥ 1).
        let entries = NonNull::new(unsafe { alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>())
            .ok_or(Errno(libc::ENOMEM))?;
        let bufs_layout =
            Layout::from_size_align(usize::from(count) * buf_size, 64).expect("valid layout");
        // SAFETY: non-zero size (count ≥ 1, buf_size > 0).
        let Some(bufs) = NonNull::new(unsafe { alloc::alloc_zeroed(bufs_layout) }) else {
            // SAFETY: allocated just above with `layout`.
            unsafe { alloc::dealloc(entries.as_ptr().cast(), layout) };
            return Err(Errno(libc::ENOMEM));
        };
        let mut ring = BufRing {
            entries,
            layout,
            bufs,
            bufs_layout,
            buf_size,
            count,
            tail: 0,
            group,
        };
        for bid in 0..count {
            ring.recycle(bid);
        }
        ring.publish();
        // SAFETY: `entries` holds `count` page-aligned entries and lives until after the group
        // is unregistered (module invariant).
        unsafe { sys.register_buf_ring(submitter, entries.as_ptr() as u64, count, group) }?;
        Ok(ring)
    }

    /// The first `len` bytes of buffer `bid`, as the kernel wrote them.
    pub fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.count);
        // SAFETY: buffer `bid` lies inside the allocation; its completion was reaped and it is
        // not back in the ring, so the kernel is not writing it while this borrow lives (the
        // borrow ends before `recycle(bid)`, which takes `&mut self`).
        unsafe {
            std::slice::from_raw_parts(
                self.bufs.as_ptr().add(usize::from(bid) * self.buf_size),
                len.min(self.buf_size),
            )
        }
    }

    /// Puts buffer `bid` back at the tail; the kernel sees it after the next `publish`.
    pub fn recycle(&mut self, bid: u16) {
        let index = usize::from(self.tail & (self.count - 1));
        assert!(bid < self.count);
        let addr = self.bufs.as_ptr() as u64 + (usize::from(bid) * self.buf_size) as u64;
        // SAFETY: `index < count`, so the entry is inside the allocation; the kernel does not
        // read it, because the slot lies past the published tail until `publish`.
        let entry = unsafe { &mut *self.entries.as_ptr().add(index) };
        entry.set_addr(addr);
        entry.set_len(self.buf_size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes every recycled buffer visible to the kernel.
    pub fn publish(&self) {
        // SAFETY: the tail is the u16 that overlays entry 0's reserved field, inside the
        // allocation and 2-byte aligned; the kernel only reads it. Release orders the entries
        // written by `recycle` before the new tail.
        let tail = unsafe { &*BufRingEntry::tail(self.entries.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the group is unregistered (or the ring
        // is gone) by now, see the module invariant.
        unsafe {
            alloc::dealloc(self.entries.as_ptr().cast(), self.layout);
            alloc::dealloc(self.bufs.as_ptr(), self.bufs_layout);
        }
    }
}
