//! What a schedule's parsed time keeps in memory (issue #21, point 6): every schedule's time
//! is held while the server runs, 10,000 of them in the benchmark, so each must cost bytes,
//! not kilobytes. A counting allocator measures what stays allocated; this binary has this one
//! test, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use runledger::domain::Timestamp;
use runledger::schedules::cron::When;

struct Counting;

/// Bytes allocated and not yet freed.
static LIVE: AtomicIsize = AtomicIsize::new(0);

// The one unsafe item of the test: a `GlobalAlloc` is an unsafe trait. It forwards every call
// to `System` unchanged and only adds the sizes up.
#[allow(unsafe_code)]
// SAFETY: every call is passed to `System` unchanged; only the sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's pointer, layout and size, as `GlobalAlloc::realloc` requires.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn ten_thousand_parsed_schedule_times_keep_a_few_dozen_bytes_each() {
    const N: usize = 10_000;
    let before = LIVE.load(Ordering::Relaxed);
    let whens: Vec<When> = (0..N)
        .map(|i| {
            let expression = format!("{} {} * * 1-5", i % 60, i % 24);
            When::parse(&expression, "Europe/Berlin", false).expect("a valid expression")
        })
        .collect();
    let per = (LIVE.load(Ordering::Relaxed) - before) / N as isize;
    // croner's parsed form alone is over 5,000 bytes (a bitfield per possible year).
    assert!(
        per <= 128,
        "{per} bytes stay allocated per parsed schedule time"
    );
    // Kept small, they still say when they are due: 2026-03-02 is a Monday.
    let sunday_evening = Timestamp(1_772_398_800_000); // 2026-03-01T21:00:00Z
    let first = whens[0].next_after(sunday_evening).expect("fires again");
    assert_eq!(first, Timestamp(1_772_406_000_000)); // 2026-03-02T00:00:00+01:00, 2026-03-01T23:00:00Z
    assert!(whens.iter().all(|w| w.next_after(sunday_evening).is_some()));
}
