//! The one parallel map every thread pool of the tool goes through: items
//! handed out one at a time to scoped threads, results in input order.
//! The one thread-count rule is here too ([`threads`]: the flag when
//! given, else the machine's cores). The chunked compressor's streaming
//! workers (`formats/pool.rs`), fed one chunk at a time while the writer
//! joins the pieces, are a queue rather than a map; they take their count
//! from [`cores`] as well. Imports nothing of the crate.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The machine's cores (1 when they cannot be told).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The one thread-count rule: `flag` (a `--threads` or `--jobs` given)
/// when set, else the machine's cores; at least 1.
pub fn threads(flag: Option<usize>) -> usize {
    flag.unwrap_or_else(cores).max(1)
}

/// `f` of every item on up to `threads` threads (never more than the
/// items), each thread with its own scratch from `scratch`; once `stop`
/// holds for a result, no new item is started. The results in input order,
/// `None` for the items never started.
pub(crate) fn map_until<T, S, R>(
    items: &[T],
    threads: usize,
    scratch: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
    stop: impl Fn(&R) -> bool + Sync,
) -> Vec<Option<R>>
where
    T: Sync,
    R: Send,
{
    let next = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                let mut mine = scratch();
                while !stopped.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = f(&mut mine, item);
                    if stop(&result) {
                        stopped.store(true, Ordering::Relaxed);
                    }
                    results.lock().expect("no panics hold the lock")[i] = Some(result);
                }
            });
        }
    });
    results.into_inner().expect("no panics hold the lock")
}

#[cfg(test)]
/// `f` of every item on up to `threads` threads, in input order.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    map_until(items, threads, || (), |(), item| f(item), |_| false)
        .into_iter()
        .map(|r| r.expect("every item is mapped when nothing stops"))
        .collect()
}

/// `f` of every item on up to `threads` threads, in input order; the first
/// error (in input order, of those met) stops the map and is returned.
pub fn try_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>> {
    let results = map_until(items, threads, || (), |(), item| f(item), Result::is_err);
    let mut out = Vec::with_capacity(items.len());
    for result in results.into_iter().flatten() {
        out.push(result?);
    }
    anyhow::ensure!(
        out.len() == items.len(),
        "a worker stopped before every item was done"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_input_order_on_any_number_of_threads() {
        let items: Vec<u64> = (0..1000).collect();
        for threads in [1, 2, 7, 5000] {
            let squares = map(&items, threads, |n| n * n);
            assert_eq!(squares, items.iter().map(|n| n * n).collect::<Vec<_>>());
        }
        assert!(map(&[] as &[u8], 4, |b| *b).is_empty());
    }

    #[test]
    fn the_first_error_stops_the_map() {
        let items: Vec<u32> = (0..10_000).collect();
        let done = AtomicUsize::new(0);
        let err = try_map(&items, 2, |&n| {
            done.fetch_add(1, Ordering::Relaxed);
            if n == 10 {
                anyhow::bail!("item {n} failed")
            }
            Ok(n)
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "item 10 failed");
        assert!(done.load(Ordering::Relaxed) < items.len(), "it went on");
        assert_eq!(
            try_map(&items[..5], 3, |&n| Ok(n + 1)).unwrap(),
            [1, 2, 3, 4, 5]
        );
    }

    #[test]
    fn each_thread_has_its_own_scratch_and_a_stop_leaves_the_rest_unstarted() {
        let items: Vec<u32> = (0..100).collect();
        let got = map_until(
            &items,
            1,
            Vec::new,
            |seen: &mut Vec<u32>, &n| {
                seen.push(n);
                seen.len()
            },
            |&len| len == 3,
        );
        assert_eq!(got[..4], [Some(1), Some(2), Some(3), None]);
        assert!(got[3..].iter().all(Option::is_none));
    }
}
