//! The buffers the collector lends CUPTI. CUPTI asks for one on the thread that launches the kernel that needs it,
//! so that thread only takes a buffer already allocated and touched: it never allocates, zeroes, locks or waits.
//! Running low, it wakes the collector's thread, which allocates more (up to a bound) off that path; finding none,
//! it hands CUPTI nothing, and CUPTI drops the records that had no room and counts them. The collector's thread alone
//! allocates, frees, and reads what CUPTI completed.

use std::alloc::Layout;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// CUPTI's records are 8-byte aligned within a buffer, and so must the buffer be.
const ALIGNMENT: usize = 8;
const PAGE_BYTES: usize = 4096;

/// A buffer CUPTI handed back, with the bytes of records it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Filled {
    pub buffer: *mut u8,
    pub valid: usize,
}

// SAFETY: a filled buffer is owned by whoever holds its `Filled`: CUPTI has let go of it.
unsafe impl Send for Filled {}

pub struct Pool {
    buffer_bytes: usize,
    /// Buffers ready to lend; a null slot is empty. One slot per buffer the pool may ever hold.
    ready: Box<[AtomicPtr<u8>]>,
    ready_count: AtomicUsize,
    /// Buffers CUPTI handed back, for the collector's thread; its capacity is the pool's bound, so a push never
    /// grows it.
    filled: Mutex<Vec<Filled>>,
    /// Buffers allocated and not freed: ready, lent and filled together. Changed by the collector's thread only.
    allocated: AtomicUsize,
    /// Set when a lender found the pool low, until the collector's thread has refilled it: one wake-up per shortage.
    low: AtomicBool,
}

impl Pool {
    /// An empty pool of buffers of `buffer_bytes`, never more than `max_buffers` of them.
    pub fn new(buffer_bytes: usize, max_buffers: usize) -> Pool {
        Pool {
            buffer_bytes,
            ready: (0..max_buffers)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            ready_count: AtomicUsize::new(0),
            filled: Mutex::new(Vec::with_capacity(max_buffers)),
            allocated: AtomicUsize::new(0),
            low: AtomicBool::new(false),
        }
    }

    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    pub fn max_buffers(&self) -> usize {
        self.ready.len()
    }

    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Acquire)
    }

    pub fn ready(&self) -> usize {
        self.ready_count.load(Ordering::Acquire)
    }

    /// A ready buffer, from any thread, without allocating or waiting; `None` when every buffer is out. `low` is
    /// called once when this take leaves `low_water` or fewer ready, until [`Pool::refilled`].
    pub fn take(&self, low_water: usize, low: impl FnOnce()) -> Option<*mut u8> {
        let buffer = self.ready.iter().find_map(|slot| {
            let p = slot.load(Ordering::Relaxed);
            (!p.is_null()
                && slot
                    .compare_exchange(
                        p,
                        std::ptr::null_mut(),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok())
            .then_some(p)
        });
        if buffer.is_some() {
            self.ready_count.fetch_sub(1, Ordering::AcqRel);
        }
        if self.ready() <= low_water && !self.low.swap(true, Ordering::AcqRel) {
            low();
        }
        buffer
    }

    /// CUPTI hands a lent buffer back holding `valid` bytes of records.
    pub fn complete(&self, filled: Filled) {
        let mut queue = self.filled.lock().unwrap_or_else(|p| p.into_inner());
        debug_assert!(queue.len() < queue.capacity());
        queue.push(filled);
    }

    /// Moves the buffers CUPTI handed back into `into` (which the caller keeps, cleared, at the pool's capacity).
    pub fn take_filled(&self, into: &mut Vec<Filled>) {
        let mut queue = self.filled.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(&mut *queue, into);
    }

    /// Makes a buffer whose records were read ready to lend again.
    pub fn give_back(&self, buffer: *mut u8) {
        let placed = self.ready.iter().any(|slot| {
            slot.compare_exchange(
                std::ptr::null_mut(),
                buffer,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        });
        debug_assert!(placed, "a pool's slots hold every buffer it allocated");
        self.ready_count.fetch_add(1, Ordering::AcqRel);
    }

    /// From the collector's thread: allocates (pages touched) or frees ready buffers until `wanted` are allocated,
    /// within the pool's bound, and lets lenders signal the next shortage.
    pub fn resize(&self, wanted: usize) {
        let wanted = wanted.min(self.max_buffers());
        while self.allocated() < wanted {
            let Some(buffer) = self.allocate() else { break };
            self.allocated.fetch_add(1, Ordering::AcqRel);
            self.give_back(buffer);
        }
        while self.allocated() > wanted {
            let Some(buffer) = self.take(0, || {}) else {
                break;
            };
            // SAFETY: a ready buffer, allocated by `allocate` with this pool's layout and lent to no one.
            unsafe { std::alloc::dealloc(buffer, self.layout()) };
            self.allocated.fetch_sub(1, Ordering::AcqRel);
        }
        self.refilled();
    }

    /// The collector's thread has seen the shortage: the next one wakes it again.
    pub fn refilled(&self) {
        self.low.store(false, Ordering::Release);
    }

    fn layout(&self) -> Layout {
        Layout::from_size_align(self.buffer_bytes, ALIGNMENT)
            .expect("a buffer's size fits a layout")
    }

    /// A new buffer with every page touched, so that CUPTI's first records in it take no page faults on the
    /// launching thread.
    fn allocate(&self) -> Option<*mut u8> {
        // SAFETY: a layout of non-zero size.
        let buffer = unsafe { std::alloc::alloc(self.layout()) };
        if buffer.is_null() {
            return None;
        }
        for page in (0..self.buffer_bytes).step_by(PAGE_BYTES) {
            // SAFETY: inside the allocation; volatile so that the writes stay writes and are not folded into a calloc.
            unsafe { buffer.add(page).write_volatile(0) };
        }
        Some(buffer)
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, System};
    use std::cell::Cell;

    use super::*;

    /// Counts the allocations each thread makes, to show that lending makes none.
    struct Counting;

    thread_local! {
        static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    }

    // SAFETY: forwards to the system allocator; the counter is a const thread-local without a destructor.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: the caller's layout, passed on.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: as allocated above.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn allocations() -> usize {
        ALLOCATIONS.with(Cell::get)
    }

    #[test]
    fn lending_never_allocates_even_when_the_pool_runs_dry() {
        let pool = Pool::new(64 << 10, 8);
        pool.resize(4);
        let wakes = Cell::new(0);
        let mut lent = [None; 6];
        let before = allocations();
        for buffer in &mut lent {
            *buffer = pool.take(1, || wakes.set(wakes.get() + 1));
        }
        assert_eq!(allocations(), before);
        assert_eq!(lent.iter().filter(|b| b.is_some()).count(), 4);
        assert_eq!(lent[4..], [None, None]);
        assert_eq!(wakes.get(), 1, "one wake-up per shortage");
    }

    #[test]
    fn a_round_of_lending_completing_and_reading_allocates_nothing() {
        let pool = Pool::new(64 << 10, 8);
        pool.resize(8);
        let mut filled = Vec::with_capacity(pool.max_buffers());
        let before = allocations();
        for _ in 0..1000 {
            let buffer = pool.take(0, || {}).expect("a ready buffer");
            pool.complete(Filled { buffer, valid: 0 });
            pool.take_filled(&mut filled);
            for f in filled.drain(..) {
                pool.give_back(f.buffer);
            }
        }
        assert_eq!(allocations(), before);
        assert_eq!(pool.allocated(), 8);
    }

    #[test]
    fn buffers_are_reused_and_the_pool_stays_within_its_bound() {
        let pool = Pool::new(64 << 10, 4);
        pool.resize(2);
        let first = pool.take(0, || {}).unwrap();
        pool.complete(Filled {
            buffer: first,
            valid: 128,
        });
        let mut filled = Vec::with_capacity(4);
        pool.take_filled(&mut filled);
        assert_eq!(
            filled,
            [Filled {
                buffer: first,
                valid: 128
            }]
        );
        for f in filled.drain(..) {
            pool.give_back(f.buffer);
        }
        let again: Vec<*mut u8> = (0..2).map(|_| pool.take(0, || {}).unwrap()).collect();
        assert!(again.contains(&first), "the read buffer is lent again");
        assert_eq!(pool.allocated(), 2);
        for b in again {
            pool.give_back(b);
        }
        pool.resize(100);
        assert_eq!(pool.allocated(), 4);
        pool.resize(1);
        assert_eq!((pool.allocated(), pool.ready()), (1, 1));
    }

    #[test]
    fn a_refill_lets_the_next_shortage_wake_the_collector_again() {
        let pool = Pool::new(64 << 10, 4);
        pool.resize(2);
        let wakes = Cell::new(0);
        let wake = || wakes.set(wakes.get() + 1);
        let a = pool.take(1, wake).unwrap();
        let b = pool.take(1, wake).unwrap();
        assert_eq!(wakes.get(), 1);
        pool.give_back(a);
        pool.give_back(b);
        pool.resize(2);
        pool.take(1, wake).unwrap();
        assert_eq!(wakes.get(), 2);
    }
}
