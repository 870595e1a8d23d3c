//! The per-direction loop: receive packets from the queue, decide their fate, hold them in
//! the scheduler, and issue verdicts when they are due. One thread per direction.
//!
//! Faults (fault.rs) are judged before the impairments: a cut connection's packets and,
//! while the link is down, every packet are dropped on arrival; a packet held when the link
//! goes down is dropped when its time comes. Commands arrive on the worker's channel
//! (control.rs) and are taken between batches.

use crate::config::DirectionConfig;
use crate::control::{Msg, State};
use crate::fault::{Action, Faults, Forge, Judged};
use crate::impair::{Decision, Impairment};
use crate::nfqueue::{
    parse_datagram, wait_readable, NfQueue, Parsed, Receiver, RecvResult, Verdict,
};
use crate::rawsock::RawSender;
use crate::sched::Scheduler;
use crate::stats::{Counters, Events, SharedCounters};
use crate::tcp;
use serde_json::json;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Sender};
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

/// A packet held by linkem: its queue id, its length (0: not inspected) and, if it is to be
/// duplicated, its copy's slot.
#[derive(Debug, Clone, Copy)]
struct Held {
    id: u32,
    len: u32,
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

/// How a worker talks to the others and to the control thread.
pub struct Links {
    pub inbox: mpsc::Receiver<Msg>,
    /// The other workers (a cut connection is cut in every direction).
    pub peers: Vec<Sender<Msg>>,
    pub events: Arc<Events>,
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
    cfg: DirectionConfig,
    seed: u64,
    faults: Faults,
    links: Option<Links>,
    reset_errors: u64,
}

impl Worker {
    /// Bind the direction's queue; errors here happen before linkem reports ready.
    pub fn new(cfg: &DirectionConfig, seed: u64, rcvbuf: usize) -> io::Result<Self> {
        let copy = cfg.needs_payload();
        let q = NfQueue::open(cfg.queue, cfg.copy_range(), cfg.queue_max_len, rcvbuf)?;
        // Duplicates and forged resets leave through a raw socket.
        let raw = if copy || cfg.inspect {
            Some(
                RawSender::new()
                    .map_err(|e| io::Error::new(e.kind(), format!("raw socket: {e}")))?,
            )
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
            cfg: cfg.clone(),
            seed,
            faults: Faults::default(),
            links: None,
            reset_errors: 0,
        })
    }

    /// Connect the worker to the control channel and the other workers.
    pub fn connect(&mut self, links: Links) {
        self.links = Some(links);
    }

    fn state(&self) -> State {
        State {
            down: self.faults.down,
            rate_bps: self.faults.rate.as_ref().map_or(0, |r| r.bps),
            impaired: self.faults.impair.is_some(),
            cut_connections: self.faults.cuts.len() as u64,
            armed: self.faults.armed(),
        }
    }

    /// Take the commands and cuts waiting in the inbox.
    fn take_messages(&mut self) {
        let Some(links) = &self.links else { return };
        let msgs: Vec<Msg> = links.inbox.try_iter().collect();
        for msg in msgs {
            match msg {
                Msg::Cut(ends) => self.faults.cut(ends),
                Msg::Command {
                    action,
                    after_bytes,
                    reply,
                } => {
                    let result = self.command(action, after_bytes);
                    let _ = reply.send(result);
                }
            }
        }
        self.shared.publish_state(&self.state());
    }

    fn command(&mut self, action: Action, after_bytes: u64) -> Result<State, String> {
        if action.needs_headers(after_bytes) && !self.cfg.inspect {
            return Err(format!(
                "direction {:?} does not inspect packet headers (config `inspect` is false): \
                 {} with after_bytes {after_bytes} needs them",
                self.name,
                action.name()
            ));
        }
        let what = action.clone();
        let resets = self
            .faults
            .command(action, after_bytes, &self.cfg, self.seed)?;
        let state = self.state();
        let mut detail = json!({"action": what.name(), "after_bytes": after_bytes, "state": state});
        if let Action::Set(patch) = &what {
            detail["down"] = json!(patch.down);
            detail["rate_bps"] = json!(patch.rate_bps);
            detail["impair"] = json!(patch.impair.is_some());
        }
        let event = if after_bytes > 0 { "armed" } else { "applied" };
        self.event(event, detail);
        // A reset at once: to the sender of the last data, then to its receiver. The
        // connection is cut either way (its packets are dropped from now on), but an end
        // that got no reset learns of it only when it next sends: not the fault asked for,
        // so the command fails with why.
        if let Some(data) = resets.get(1) {
            self.cut_everywhere(data.ends);
            let failed = self.forge(&resets, Some(data.ends));
            if !failed.is_empty() {
                return Err(format!(
                    "cut {} but sent {} of its {} resets: {}",
                    data.ends.describe(),
                    resets.len() - failed.len(),
                    resets.len(),
                    failed.join("; ")
                ));
            }
        }
        Ok(state)
    }

    fn event(&self, event: &str, detail: serde_json::Value) {
        if let Some(links) = &self.links {
            links.events.push(&self.name, event, detail);
        }
    }

    fn cut_everywhere(&mut self, ends: tcp::Ends) {
        self.faults.cut(ends);
        if let Some(links) = &self.links {
            for peer in &links.peers {
                let _ = peer.send(Msg::Cut(ends));
            }
        }
    }

    /// Send forged resets; `cut`: the connection (its data's way) they cut now, logged as
    /// an event with the resets sent and those that failed (`wanted` says how many there
    /// were: the harness holds the event to it). Resets that answer later packets of a cut
    /// connection are only counted. Returns why each failed one failed.
    fn forge(&mut self, resets: &[Forge], cut: Option<tcp::Ends>) -> Vec<String> {
        let mut sent = Vec::new();
        let mut failed = Vec::new();
        for f in resets {
            let packet = tcp::reset(&f.ends, f.seq);
            let result = match &self.raw {
                Some(raw) => raw.send(&packet),
                None => Err(io::Error::other("no raw socket")),
            };
            match result {
                Ok(()) => {
                    self.counters.resets_sent += 1;
                    sent.push(json!({"to": f.ends.describe(), "seq": f.seq}));
                }
                Err(e) => {
                    if self.reset_errors == 0 {
                        eprintln!("linkem: {}: sending a reset failed: {e}", self.name);
                    }
                    self.reset_errors += 1;
                    failed.push(format!("to {}: {e}", f.ends.describe()));
                }
            }
        }
        if let Some(ends) = cut {
            let detail = json!({
                "connection": ends.describe(),
                "resets": sent,
                "wanted": resets.len(),
                "failed": failed,
            });
            self.event("reset", detail);
        }
        failed
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
            self.take_messages();
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
        let inspect = self.cfg.inspect;
        let mut forged: Vec<(Vec<Forge>, Option<tcp::Ends>)> = Vec::new();
        let mut fired: Vec<&'static str> = Vec::new();
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
                faults,
                cfg,
                seed,
                ..
            } = self;
            parse_datagram(rx.datagram(i), |m| {
                let Parsed::Packet { id, payload } = m else {
                    return;
                };
                counters.received += 1;
                let headers = if inspect {
                    payload.and_then(tcp::parse)
                } else {
                    None
                };
                let len = headers.map_or(0, |h| h.len);
                counters.received_bytes += u64::from(len);
                let judged = faults.judge(headers.as_ref(), cfg, *seed);
                if let Some(action) = faults.take_fired() {
                    fired.push(action);
                }
                match judged {
                    Judged::Pass => {}
                    Judged::Down => {
                        counters.dropped_down += 1;
                        q.push_verdict(id, Verdict::Drop);
                        return;
                    }
                    Judged::Cut { resets, new_cut } => {
                        counters.dropped_cut += 1;
                        q.push_verdict(id, Verdict::Drop);
                        if !resets.is_empty() || new_cut.is_some() {
                            forged.push((resets, new_cut));
                        }
                        return;
                    }
                }
                let (decision, faulty) = match faults.impair.as_mut() {
                    Some(f) => (f.decide(), true),
                    None => (imp.decide(), false),
                };
                match decision {
                    Decision::Drop => {
                        if faulty {
                            counters.dropped_fault += 1;
                        } else {
                            counters.dropped_loss += 1;
                        }
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
                        // A fault's rate limit: the bottleneck first, then the delay.
                        let left = match faults.rate.as_mut() {
                            Some(rate) => match rate.admit(now, len) {
                                Some(at) => at,
                                None => {
                                    counters.dropped_rate += 1;
                                    q.push_verdict(id, Verdict::Drop);
                                    return;
                                }
                            },
                            None => now,
                        };
                        let copy = match (duplicate, payload) {
                            (true, Some(p)) if raw.is_some() && cfg.needs_payload() => {
                                copies.put(p)
                            }
                            _ => NO_COPY,
                        };
                        if delay_ns == 0 && left == now {
                            counters.passed += 1;
                            counters.passed_bytes += u64::from(len);
                            q.push_verdict(id, Verdict::Accept);
                            if copy != NO_COPY {
                                send_copy(raw, copies, copy, counters, dup_errors);
                            }
                        } else {
                            sched.push(left + delay_ns, Held { id, len, copy });
                        }
                    }
                }
            });
            if self.q.should_flush() {
                self.q.flush()?;
            }
        }
        for action in fired {
            let detail = json!({"action": action, "state": self.state()});
            self.event("fired", detail);
        }
        for (resets, new_cut) in forged {
            if let Some(ends) = new_cut {
                self.cut_everywhere(ends);
            }
            self.forge(&resets, new_cut);
        }
        self.counters.queued_now = self.sched.len() as u64;
        self.counters.max_queued = self.counters.max_queued.max(self.counters.queued_now);
        Ok(n)
    }

    /// Accept every held packet whose time has come (drop it if the link went down).
    fn release_due(&mut self, now: u64) -> io::Result<()> {
        while let Some((_, h)) = self.sched.pop_due(now) {
            if self.faults.down {
                self.counters.dropped_down += 1;
                self.q.push_verdict(h.id, Verdict::Drop);
                if h.copy != NO_COPY {
                    self.copies.release(h.copy);
                }
                continue;
            }
            self.counters.passed += 1;
            self.counters.passed_bytes += u64::from(h.len);
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
            self.counters.passed_bytes += u64::from(h.len);
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
