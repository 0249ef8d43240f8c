//! The span processor: spans are handed over one by one as they end; queueing, batching,
//! timers and the queue limit live here, on a native thread, so no batch ever exists on the
//! JS thread.
//!
//! A batcher thread forms a batch when `max_export_batch_size` spans are queued, when the
//! oldest queued span has waited `scheduled_delay`, or on flush/shutdown, and hands it to the
//! batch handler through the [`Dispatcher`]. Queued spans count as in flight in the
//! exporter's statistics, and `max_queue_bytes` covers queued and in-flight bytes together.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dispatch::Dispatcher;
use crate::exporter::{Exporter, Rejected, Ticket};

/// Batching settings.
#[derive(Clone, Debug)]
pub struct ProcessorConfig {
    /// Longest a span waits in the queue before its batch is formed.
    pub scheduled_delay: Duration,
    /// Most spans per batch.
    pub max_export_batch_size: usize,
}

impl Default for ProcessorConfig {
    fn default() -> Self {
        ProcessorConfig {
            scheduled_delay: Duration::from_millis(1000),
            max_export_batch_size: 512,
        }
    }
}

/// Receives each formed batch as span frame bodies (on a dispatcher worker; see
/// [`Exporter::process_spans`]) and must eventually call [`Exporter::complete`] with the
/// ticket.
pub type BatchHandler = Arc<dyn Fn(Ticket, Vec<Vec<u8>>) + Send + Sync>;

/// See the module docs. Dropping it stops the batcher thread after it drained its queue.
pub struct Processor {
    handle: ProcessorRef,
}

/// A handle for flushing and shutting down a [`Processor`] from other threads. It does not
/// keep the processor running: dropping the `Processor` stops it.
#[derive(Clone)]
pub struct ProcessorRef {
    shared: Arc<Shared>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("config", &self.handle.shared.config)
            .finish()
    }
}

struct Shared {
    exporter: Arc<Exporter>,
    config: ProcessorConfig,
    dispatcher: Arc<Dispatcher>,
    handler: BatchHandler,
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    spans: VecDeque<Vec<u8>>,
    bytes: usize,
    oldest: Option<Instant>,
    /// Spans enqueued / spans handed to a batch, ever.
    enqueued: u64,
    batched: u64,
    /// Flushes want everything up to this sequence number batched now.
    flush_upto: u64,
    stop: bool,
}

impl Processor {
    /// Starts the batcher thread.
    pub fn new(
        exporter: Arc<Exporter>,
        config: ProcessorConfig,
        dispatcher: Arc<Dispatcher>,
        handler: BatchHandler,
    ) -> Processor {
        let shared = Arc::new(Shared {
            exporter,
            config,
            dispatcher,
            handler,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("offloop-batcher".into())
            .spawn(move || s.run())
            .expect("spawn offloop batcher thread");
        Processor {
            handle: ProcessorRef {
                shared,
                thread: Arc::new(Mutex::new(Some(thread))),
            },
        }
    }

    /// The exporter batches go to.
    pub fn exporter(&self) -> &Arc<Exporter> {
        &self.handle.shared.exporter
    }

    /// A handle for flush/shutdown from other threads.
    pub fn handle(&self) -> ProcessorRef {
        self.handle.clone()
    }

    /// See [`ProcessorRef::enqueue`].
    pub fn enqueue(&self, frame: &[u8]) -> Result<(), Rejected> {
        self.handle.enqueue(frame)
    }

    /// See [`ProcessorRef::flush`].
    pub fn flush(&self, timeout: Option<Duration>) -> bool {
        self.handle.flush(timeout)
    }

    /// See [`ProcessorRef::shutdown`].
    pub fn shutdown(&self, timeout: Option<Duration>) -> bool {
        self.handle.shutdown(timeout)
    }
}

impl ProcessorRef {
    /// Queues one span frame body (copied). Refused spans are counted dropped (queue full) or
    /// failed (shut down).
    pub fn enqueue(&self, frame: &[u8]) -> Result<(), Rejected> {
        // Copied before taking the lock, so the batcher never waits behind it.
        let owned = frame.to_vec();
        let mut q = self.shared.lock();
        if q.stop {
            return Err(self.shared.exporter.refuse_closed(1));
        }
        self.shared.exporter.admit(1, frame.len())?;
        q.spans.push_back(owned);
        q.bytes += frame.len();
        q.enqueued += 1;
        q.oldest.get_or_insert_with(Instant::now);
        if q.spans.len() >= self.shared.config.max_export_batch_size {
            self.shared.wake.notify_all();
        }
        Ok(())
    }

    /// Forms batches of everything queued now and waits (up to `timeout`) until they and all
    /// earlier batches are complete.
    pub fn flush(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        {
            let mut q = self.shared.lock();
            let target = q.enqueued;
            q.flush_upto = q.flush_upto.max(target);
            self.shared.wake.notify_all();
            while q.batched < target {
                q = match deadline {
                    None => self.shared.wake.wait(q).unwrap_or_else(|p| p.into_inner()),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return false;
                        }
                        self.shared
                            .wake
                            .wait_timeout(q, d - now)
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    }
                };
            }
        }
        self.shared
            .exporter
            .flush(deadline.map(|d| d.saturating_duration_since(Instant::now())))
    }

    /// Refuses spans from now on (counted failed); spans already queued are still batched and
    /// written. The first step of [`ProcessorRef::shutdown`]; a caller that waits for the
    /// shutdown on another thread calls it first, so a span handed over after `shutdown()`
    /// was called is refused however late that thread starts. Idempotent.
    pub fn close(&self) {
        let mut q = self.shared.lock();
        q.stop = true;
        self.shared.wake.notify_all();
    }

    /// Stops accepting spans, batches everything queued, waits for it (up to `timeout`) and
    /// stops the batcher thread. Idempotent.
    pub fn shutdown(&self, timeout: Option<Duration>) -> bool {
        self.close();
        let done = self.flush(timeout);
        self.shared.exporter.close();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if done {
                let _ = t.join();
            }
        }
        done
    }
}

impl Drop for Processor {
    fn drop(&mut self) {
        let mut q = self.handle.shared.lock();
        q.stop = true;
        self.handle.shared.wake.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut q = self.lock();
        loop {
            let due = !q.spans.is_empty()
                && (q.spans.len() >= self.config.max_export_batch_size
                    || q.stop
                    || q.flush_upto > q.batched
                    || q.oldest
                        .is_some_and(|t| t.elapsed() >= self.config.scheduled_delay));
            if due {
                let n = q.spans.len().min(self.config.max_export_batch_size);
                let frames: Vec<Vec<u8>> = q.spans.drain(..n).collect();
                let payload: usize = frames.iter().map(Vec::len).sum();
                q.bytes -= payload;
                q.batched += n as u64;
                q.oldest = if q.spans.is_empty() {
                    None
                } else {
                    Some(Instant::now())
                };
                // Accepted under the queue lock, so a flush that sees `batched` move past
                // its target also finds these spans' ticket in the exporter.
                let ticket = self.exporter.accept_admitted(n as u32, payload);
                self.wake.notify_all();
                drop(q);
                // The frames are handed over as they are: no batch buffer is assembled, and
                // `enqueue` never waits behind a copy.
                let handler = Arc::clone(&self.handler);
                self.dispatcher
                    .submit(Box::new(move || handler(ticket, frames)));
                q = self.lock();
                continue;
            }
            if q.stop && q.spans.is_empty() {
                return;
            }
            q = match q.oldest {
                None => self.wake.wait(q).unwrap_or_else(|p| p.into_inner()),
                Some(t) => {
                    let wait = self.config.scheduled_delay.saturating_sub(t.elapsed());
                    self.wake
                        .wait_timeout(q, wait.max(Duration::from_millis(1)))
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }
}
