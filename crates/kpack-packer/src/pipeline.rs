//! Preparing code objects on every core within a memory budget, and
//! handing them to the archive writer in order.
//!
//! A split's units of work (a code object, or a compressed bundle decoded
//! as a stream) are prepared by worker threads and consumed by the caller
//! in their original order, so the archives' bytes never depend on timing.
//! No more units are in flight (taken and not yet consumed) than the
//! budget allows, whatever the input's size; a huge binary on two cores
//! costs no more than a small one.

use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, PoisonError};

/// What one unit in flight may cost at most: a piece of its code object
/// read (8 MiB), the piece or whole small code object compressed (8 MiB),
/// the zstd contexts and a decoder's window (up to 16 MiB), and its spool
/// in memory ([`crate::spool::SPOOL_MEMORY`], 8 MiB).
pub const PER_UNIT: u64 = 40 * 1024 * 1024;

/// What a split needs besides its units in flight: the program, the
/// tables of contents, the parsed headers, the pages of the tables it
/// patches.
pub const BASE: u64 = 64 * 1024 * 1024;

/// The memory a split may use, which bounds how many units are prepared
/// at once (`--memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    bytes: u64,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget::DEFAULT
    }
}

impl MemoryBudget {
    /// 256 MiB.
    pub const DEFAULT: MemoryBudget = MemoryBudget {
        bytes: 256 * 1024 * 1024,
    };

    pub fn new(bytes: u64) -> MemoryBudget {
        MemoryBudget { bytes }
    }

    pub fn bytes(self) -> u64 {
        self.bytes
    }

    /// Parses `256M`, `1G`, `512MiB`, `300000000` (bytes); K, M, G and T
    /// are powers of 1024.
    pub fn parse(text: &str) -> Result<MemoryBudget, String> {
        let text = text.trim();
        let digits = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(digits);
        let number: u64 = number
            .parse()
            .map_err(|_| format!("{text:?} is not a size such as 256M or 1G"))?;
        let shift = match unit.trim().to_ascii_uppercase().as_str() {
            "" | "B" => 0,
            "K" | "KB" | "KIB" => 10,
            "M" | "MB" | "MIB" => 20,
            "G" | "GB" | "GIB" => 30,
            "T" | "TB" | "TIB" => 40,
            _ => return Err(format!("{text:?}: unknown unit {unit:?} (K, M, G or T)")),
        };
        let bytes = number
            .checked_mul(1 << shift)
            .ok_or_else(|| format!("{text:?} is too large"))?;
        Ok(MemoryBudget { bytes })
    }

    /// Units the budget lets be in flight at once: at least one.
    pub fn units(self) -> usize {
        (self.bytes.saturating_sub(BASE) / PER_UNIT).max(1) as usize
    }

    /// Worker threads: one per core the budget pays for.
    pub fn workers(self, threads: usize) -> usize {
        self.units().min(threads.max(1))
    }
}

/// Shared between the workers and the consumer.
struct State<R> {
    /// The next unit to take.
    next: usize,
    /// Units consumed so far (all before this index).
    consumed: usize,
    /// Prepared, waiting for their turn.
    done: BTreeMap<usize, R>,
    /// The consumer stopped (an error), or a worker panicked.
    stop: bool,
    panic: Option<Box<dyn std::any::Any + Send>>,
}

/// Prepares `units` with `prepare` on `workers` threads, at most `window`
/// in flight, and hands each result to `consume` in the units' order.
/// Stops at the first error `consume` returns.
pub fn in_order<T: Sync, R: Send, E>(
    units: &[T],
    (workers, window): (usize, usize),
    prepare: impl Fn(&T) -> R + Sync,
    mut consume: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    let state = Mutex::new(State {
        next: 0,
        consumed: 0,
        done: BTreeMap::new(),
        stop: false,
        panic: None,
    });
    let changed = Condvar::new();
    let window = window.max(1);
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, units.len().max(1)) {
            scope.spawn(|| loop {
                let index = {
                    let mut guard = lock();
                    while !guard.stop
                        && guard.next < units.len()
                        && guard.next >= guard.consumed + window
                    {
                        guard = changed.wait(guard).unwrap_or_else(PoisonError::into_inner);
                    }
                    if guard.stop || guard.next >= units.len() {
                        return;
                    }
                    guard.next += 1;
                    guard.next - 1
                };
                let result = panic::catch_unwind(AssertUnwindSafe(|| prepare(&units[index])));
                let mut guard = lock();
                match result {
                    Ok(result) => {
                        guard.done.insert(index, result);
                    }
                    Err(payload) => {
                        guard.stop = true;
                        guard.panic = Some(payload);
                    }
                }
                changed.notify_all();
            });
        }
        let outcome = consume_in_order(units.len(), &lock, &changed, &mut consume);
        lock().stop = true;
        changed.notify_all();
        outcome
    })
}

/// The consumer's side of [`in_order`].
fn consume_in_order<'s, R, E>(
    count: usize,
    lock: &impl Fn() -> std::sync::MutexGuard<'s, State<R>>,
    changed: &Condvar,
    consume: &mut impl FnMut(R) -> Result<(), E>,
) -> Result<(), E>
where
    R: 's,
{
    for index in 0..count {
        let result = {
            let mut guard = lock();
            loop {
                if let Some(payload) = guard.panic.take() {
                    drop(guard);
                    panic::resume_unwind(payload);
                }
                if let Some(result) = guard.done.remove(&index) {
                    break result;
                }
                guard = changed.wait(guard).unwrap_or_else(PoisonError::into_inner);
            }
        };
        consume(result)?;
        lock().consumed = index + 1;
        changed.notify_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn results_come_in_order_and_never_more_than_the_window_in_flight() {
        let units: Vec<u64> = (0..200).collect();
        let in_flight = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let mut seen = Vec::new();
        in_order(
            &units,
            (4, 3),
            |&unit| {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Later units finish first more often than not.
                std::thread::sleep(std::time::Duration::from_micros(200 - unit));
                unit * 2
            },
            |result| {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                seen.push(result);
                Ok::<(), ()>(())
            },
        )
        .unwrap();
        assert_eq!(seen, (0..200).map(|u| u * 2).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 3);
    }

    #[test]
    fn the_first_error_stops_the_work() {
        let units: Vec<u32> = (0..1000).collect();
        let prepared = AtomicUsize::new(0);
        let error = in_order(
            &units,
            (2, 4),
            |&unit| {
                prepared.fetch_add(1, Ordering::SeqCst);
                unit
            },
            |unit| if unit == 10 { Err(unit) } else { Ok(()) },
        );
        assert_eq!(error, Err(10));
        assert!(prepared.load(Ordering::SeqCst) <= 15);
    }

    #[test]
    fn sizes_parse_with_binary_units_and_bound_the_workers() {
        assert_eq!(MemoryBudget::parse("256M").unwrap().bytes(), 256 << 20);
        assert_eq!(MemoryBudget::parse("1GiB").unwrap().bytes(), 1 << 30);
        assert_eq!(MemoryBudget::parse("4096").unwrap().bytes(), 4096);
        assert!(MemoryBudget::parse("lots").is_err());
        assert!(MemoryBudget::parse("3X").is_err());
        assert_eq!(MemoryBudget::DEFAULT.workers(2), 2);
        assert_eq!(MemoryBudget::parse("100M").unwrap().workers(8), 1);
        assert_eq!(MemoryBudget::parse("1G").unwrap().workers(64), 24);
    }
}
