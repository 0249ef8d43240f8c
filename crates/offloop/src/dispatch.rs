//! Bounded concurrency over someone else's threads.
//!
//! The Node binding runs batches on tokio's blocking pool, but on a 2-core machine the JS
//! thread must keep a core: at most `workers` batches run at once, the rest wait in a queue
//! (not in blocked threads). A finishing job picks up the next queued one on the same thread.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

/// A unit of work.
pub type Job = Box<dyn FnOnce() + Send + 'static>;
/// Runs a job on some thread (tokio `spawn_blocking`, a thread pool, `std::thread::spawn`).
pub type Spawn = Arc<dyn Fn(Job) + Send + Sync>;

/// The cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// Workers to use by default: all cores but one (at least one), leaving the JS thread a core.
pub fn default_workers() -> usize {
    cores().saturating_sub(1).max(1)
}

/// Nice value of threads running export work in the background (Linux): the scheduler then
/// hands a contended core to the JS thread at once instead of after a time slice of several
/// milliseconds, which is what its event loop would see as a stall.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`] (once per thread).
/// Linux sets the nice value per thread; elsewhere `setpriority` would renice the whole
/// process, so this does nothing there.
pub fn background_priority() {
    #[cfg(target_os = "linux")]
    {
        thread_local!(static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
        DONE.with(|done| {
            if !done.replace(true) {
                // SAFETY: plain syscalls on the calling thread; a failure leaves the priority as
                // it was, which is harmless.
                unsafe {
                    let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                    libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE);
                }
            }
        });
    }
}

/// The process-wide pool of `threads` threads (at [`background_priority`]) that spreads the
/// spans of a batch; exporters asking for the same size share it, so an app with several
/// exporters does not multiply threads. `None` for one thread, or if the threads could not be
/// started (the work then runs on the calling thread).
pub fn span_pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    if threads <= 1 {
        return None;
    }
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(pool) = pools.get(&threads) {
        return Some(Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("offloop-span-{i}"))
        .start_handler(|_| background_priority())
        .build()
        .ok()?;
    let pool = Arc::new(pool);
    pools.insert(threads, Arc::clone(&pool));
    Some(pool)
}

/// A spawner that starts a thread per job run (jobs chain on it while work is queued).
pub fn std_threads() -> Spawn {
    Arc::new(|job| {
        std::thread::Builder::new()
            .name("offloop-worker".into())
            .spawn(job)
            .expect("spawn offloop worker thread");
    })
}

/// A spawner that starts a thread of its own per job run, at [`background_priority`]: the
/// lowered priority stays on threads that only ever run export work (a shared pool would
/// keep it for whatever it runs next, and priority cannot be raised back unprivileged). If a
/// thread cannot be started, the job goes to `fallback` instead.
pub fn background_threads(fallback: Spawn) -> Spawn {
    Arc::new(move |job| {
        let slot = Arc::new(Mutex::new(Some(job)));
        let mine = Arc::clone(&slot);
        let started = std::thread::Builder::new()
            .name("offloop-batch".into())
            .spawn(move || {
                background_priority();
                let job = mine.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(job) = job {
                    job();
                }
            });
        if started.is_err() {
            let job = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(job) = job {
                fallback(job);
            }
        }
    })
}

/// Runs at most `workers` jobs at a time.
pub struct Dispatcher {
    workers: usize,
    spawn: Spawn,
    state: Mutex<State>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("workers", &self.workers)
            .finish()
    }
}

#[derive(Default)]
struct State {
    running: usize,
    queue: VecDeque<Job>,
}

impl Dispatcher {
    /// A dispatcher over `spawn` with `workers` (≥ 1) concurrent jobs.
    pub fn new(workers: usize, spawn: Spawn) -> Arc<Dispatcher> {
        Arc::new(Dispatcher {
            workers: workers.max(1),
            spawn,
            state: Mutex::new(State::default()),
        })
    }

    /// The concurrency limit.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Runs `job` now if a worker is free, else queues it.
    pub fn submit(self: &Arc<Self>, job: Job) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.running < self.workers {
            s.running += 1;
            drop(s);
            let me = Arc::clone(self);
            (self.spawn)(Box::new(move || me.run(job)));
        } else {
            s.queue.push_back(job);
        }
    }

    fn run(&self, mut job: Job) {
        loop {
            // A panicking job must not leak its worker slot.
            let _ = catch_unwind(AssertUnwindSafe(job));
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match s.queue.pop_front() {
                Some(next) => job = next,
                None => {
                    s.running -= 1;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_run_jobs_lowered_and_leave_the_fallback_alone() {
        let nice_of_current = || -> i64 {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(16).unwrap().parse().unwrap()
        };
        let base = nice_of_current();
        let fallback_used = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&fallback_used);
        let spawn = background_threads(Arc::new(move |job| {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            job()
        }));
        let (tx, rx) = std::sync::mpsc::channel();
        spawn(Box::new(move || {
            let name = std::thread::current().name().map(str::to_string);
            tx.send((name, nice_of_current())).unwrap();
        }));
        let (name, nice) = rx.recv().unwrap();
        assert_eq!(name.as_deref(), Some("offloop-batch"));
        assert_eq!(nice, base + i64::from(BACKGROUND_NICE).min(19 - base));
        assert!(!fallback_used.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(nice_of_current(), base);
    }

    #[test]
    fn span_pools_are_shared_per_size() {
        assert!(span_pool(1).is_none());
        let a = span_pool(3).unwrap();
        let b = span_pool(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 3);
        assert!(!Arc::ptr_eq(&a, &span_pool(2).unwrap()));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_are_reniced_and_others_are_not() {
        let nice = |tid: i64| -> i64 {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(16).unwrap().parse().unwrap()
        };
        // SAFETY: gettid has no preconditions.
        let tid = || unsafe { libc::syscall(libc::SYS_gettid) };
        let (lowered, before) = std::thread::spawn(move || {
            let before = nice(tid());
            background_priority();
            background_priority();
            (nice(tid()), before)
        })
        .join()
        .unwrap();
        assert_eq!(
            lowered,
            before + i64::from(BACKGROUND_NICE).min(19 - before)
        );
        assert_eq!(nice(tid()), before, "the calling thread keeps its priority");
    }
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    #[test]
    fn never_exceeds_workers() {
        let d = Dispatcher::new(2, std_threads());
        let live = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        for i in 0..20 {
            let (live, peak, tx) = (live.clone(), peak.clone(), tx.clone());
            d.submit(Box::new(move || {
                let n = live.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
                live.fetch_sub(1, Ordering::SeqCst);
                if i == 3 {
                    panic!("job panics; slot must be released");
                }
                tx.send(()).unwrap();
            }));
        }
        for _ in 0..19 {
            rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }
}
