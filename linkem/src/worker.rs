//! The per-direction loop: receive packets from the queue, decide their fate, hold them in
//! the scheduler, and issue verdicts when they are due. One thread per direction.

use crate::config::DirectionConfig;
use crate::impair::{Decision, Impairment};
use crate::nfqueue::{
    parse_datagram, wait_readable, NfQueue, Parsed, Receiver, RecvResult, Verdict,
};
use crate::rawsock::RawSender;
use crate::sched::Scheduler;
use crate::stats::{Counters, SharedCounters};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// Longest sleep between checks of the stop flag.
const MAX_WAIT_NS: u64 = 20_000_000;
/// Datagrams per recvmmsg call.
const RECV_BATCH: usize = 64;
/// Receive slot for metadata-only messages (the message is about 100-200 bytes).
const META_SLOT: usize = 1024;
/// Receive slot when packets are copied (copy range 65535 plus metadata).
const PACKET_SLOT: usize = 65536 + 1024;
const NO_COPY: u32 = u32::MAX;

/// A packet held by linkem: its queue id and, if it is to be duplicated, its copy's slot.
#[derive(Debug, Clone, Copy)]
struct Held {
    id: u32,
    copy: u32,
}

/// Copies of packets waiting to be re-injected, in reusable buffers.
#[derive(Default)]
struct CopyPool {
    slots: Vec<Vec<u8>>,
    free: Vec<u32>,
}

impl CopyPool {
    fn put(&mut self, data: &[u8]) -> u32 {
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.clear();
            s.extend_from_slice(data);
            i
        } else {
            self.slots.push(data.to_vec());
            (self.slots.len() - 1) as u32
        }
    }
    fn get(&self, i: u32) -> &[u8] {
        &self.slots[i as usize]
    }
    fn release(&mut self, i: u32) {
        self.free.push(i);
    }
}

pub struct Worker {
    pub name: String,
    q: NfQueue,
    rx: Receiver,
    raw: Option<RawSender>,
    imp: Impairment,
    sched: Scheduler<Held>,
    copies: CopyPool,
    counters: Counters,
    pub shared: Arc<SharedCounters>,
    epoch: Instant,
    dup_errors: u64,
}

impl Worker {
    /// Bind the direction's queue; errors here happen before linkem reports ready.
    pub fn new(cfg: &DirectionConfig, seed: u64, rcvbuf: usize) -> io::Result<Self> {
        let copy = cfg.needs_payload();
        let q = NfQueue::open(cfg.queue, copy, cfg.queue_max_len, rcvbuf)?;
        let raw =
            if copy {
                Some(RawSender::new().map_err(|e| {
                    io::Error::new(e.kind(), format!("raw socket for duplicates: {e}"))
                })?)
            } else {
                None
            };
        let counters = Counters {
            received: q.early_accepted,
            passed: q.early_accepted,
            ..Default::default()
        };
        let shared = Arc::new(SharedCounters::default());
        shared.publish(&counters);
        Ok(Worker {
            name: cfg.name.clone(),
            rx: Receiver::new(RECV_BATCH, if copy { PACKET_SLOT } else { META_SLOT }),
            q,
            raw,
            imp: Impairment::new(cfg, seed),
            sched: Scheduler::new(),
            copies: CopyPool::default(),
            counters,
            shared,
            epoch: Instant::now(),
            dup_errors: 0,
        })
    }

    pub fn queue_num(&self) -> u16 {
        self.q.queue_num()
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Run until `stop` is set, then release everything held. The socket stays open (the
    /// caller reads the kernel's counters first, then drops the worker, which unbinds).
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        // Sleep precisely: the default 50 µs timer slack would add to every release.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        let r = self.main_loop(stop);
        let f = self.shutdown();
        r.and(f)
    }

    fn main_loop(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let fd = self.q.as_raw_fd();
        while !stop.load(Relaxed) {
            let got = self.receive_batch()?;
            let now = self.now_ns();
            self.release_due(now)?;
            self.q.flush()?;
            self.shared.publish(&self.counters);
            if got == 0 {
                let wait = match self.sched.next_at() {
                    Some(at) => at.saturating_sub(self.now_ns()).min(MAX_WAIT_NS),
                    None => MAX_WAIT_NS,
                };
                if wait > 0 {
                    wait_readable(fd, wait)?;
                }
            }
        }
        Ok(())
    }

    /// Receive one batch and decide each packet. Returns the number of datagrams read.
    fn receive_batch(&mut self) -> io::Result<usize> {
        let n = match self.rx.recv(self.q.as_raw_fd())? {
            RecvResult::Got(n) => n,
            RecvResult::WouldBlock => return Ok(0),
            RecvResult::Overrun => {
                self.shared.enobufs.fetch_add(1, Relaxed);
                return Ok(1);
            }
        };
        let now = self.now_ns();
        for i in 0..n {
            // Split borrows: the datagram lives in rx while we mutate the rest.
            let Worker {
                rx,
                q,
                raw,
                imp,
                sched,
                copies,
                counters,
                dup_errors,
                ..
            } = self;
            parse_datagram(rx.datagram(i), |m| {
                let Parsed::Packet { id, payload } = m else {
                    return;
                };
                counters.received += 1;
                match imp.decide() {
                    Decision::Drop => {
                        counters.dropped_loss += 1;
                        q.push_verdict(id, Verdict::Drop);
                    }
                    Decision::Pass {
                        delay_ns,
                        duplicate,
                        reordered,
                    } => {
                        if reordered {
                            counters.reordered += 1;
                        }
                        let copy = match (duplicate, payload) {
                            (true, Some(p)) if raw.is_some() => copies.put(p),
                            _ => NO_COPY,
                        };
                        if delay_ns == 0 {
                            counters.passed += 1;
                            q.push_verdict(id, Verdict::Accept);
                            if copy != NO_COPY {
                                send_copy(raw, copies, copy, counters, dup_errors);
                            }
                        } else {
                            sched.push(now + delay_ns, Held { id, copy });
                        }
                    }
                }
            });
            if self.q.should_flush() {
                self.q.flush()?;
            }
        }
        self.counters.queued_now = self.sched.len() as u64;
        self.counters.max_queued = self.counters.max_queued.max(self.counters.queued_now);
        Ok(n)
    }

    /// Accept every held packet whose time has come.
    fn release_due(&mut self, now: u64) -> io::Result<()> {
        while let Some((_, h)) = self.sched.pop_due(now) {
            self.counters.passed += 1;
            self.q.push_verdict(h.id, Verdict::Accept);
            if h.copy != NO_COPY {
                send_copy(
                    &self.raw,
                    &mut self.copies,
                    h.copy,
                    &mut self.counters,
                    &mut self.dup_errors,
                );
            }
            if self.q.should_flush() {
                self.q.flush()?;
            }
        }
        self.counters.queued_now = self.sched.len() as u64;
        Ok(())
    }

    /// Stop: take what the kernel has queued for us and let everything through.
    fn shutdown(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        for _ in 0..10_000 {
            match self.rx.recv(self.q.as_raw_fd()) {
                Ok(RecvResult::Got(n)) => {
                    for i in 0..n {
                        let Worker {
                            rx, q, counters, ..
                        } = self;
                        parse_datagram(rx.datagram(i), |m| {
                            if let Parsed::Packet { id, .. } = m {
                                counters.received += 1;
                                counters.passed += 1;
                                q.push_verdict(id, Verdict::Accept);
                            }
                        });
                        if self.q.should_flush() {
                            result = result.and(self.q.flush());
                        }
                    }
                }
                Ok(RecvResult::Overrun) => {
                    self.shared.enobufs.fetch_add(1, Relaxed);
                }
                Ok(RecvResult::WouldBlock) | Err(_) => break,
            }
        }
        for h in self.sched.drain_all() {
            self.counters.passed += 1;
            self.q.push_verdict(h.id, Verdict::Accept);
            if h.copy != NO_COPY {
                self.copies.release(h.copy);
            }
            if self.q.should_flush() {
                result = result.and(self.q.flush());
            }
        }
        result = result.and(self.q.flush());
        self.counters.queued_now = 0;
        self.shared.publish(&self.counters);
        if self.dup_errors > 0 {
            eprintln!(
                "linkem: {}: {} duplicate copies could not be sent",
                self.name, self.dup_errors
            );
        }
        result
    }
}

fn send_copy(
    raw: &Option<RawSender>,
    copies: &mut CopyPool,
    slot: u32,
    counters: &mut Counters,
    errors: &mut u64,
) {
    if let Some(raw) = raw {
        match raw.send(copies.get(slot)) {
            Ok(()) => counters.duplicated += 1,
            Err(e) => {
                if *errors == 0 {
                    eprintln!("linkem: sending a duplicate failed: {e}");
                }
                *errors += 1;
            }
        }
    }
    copies.release(slot);
}
