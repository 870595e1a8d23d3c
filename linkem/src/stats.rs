//! Counters, the stats file, the events log and the kernel's per-queue drop counters.

use crate::control::State;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Events kept in the stats file at most (the oldest are dropped and counted).
const MAX_EVENTS: usize = 10_000;

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One direction's counters as written to the stats file.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    /// Packets linkem received from its queue.
    pub received: u64,
    /// Packets accepted (verdict ACCEPT), not counting re-injected copies.
    pub passed: u64,
    /// Packets dropped by the loss model.
    pub dropped_loss: u64,
    /// Packets the kernel dropped before linkem saw them: queue full (`queue_dropped`) or
    /// netlink socket full (`user_dropped`, seen as ENOBUFS).
    pub dropped_overflow: u64,
    /// Extra copies sent (duplication).
    pub duplicated: u64,
    /// Packets sent without the delay (reordering).
    pub reordered: u64,
    /// Packets held by linkem right now.
    pub queued_now: u64,
    /// Most packets held at once.
    pub max_queued: u64,
    /// Bytes of the packets received and passed (IP lengths), counted only by a direction
    /// that inspects headers (0 otherwise).
    pub received_bytes: u64,
    pub passed_bytes: u64,
    /// Packets dropped by faults: the link down, the fault's own loss (an `impair` patch),
    /// a full queue under a fault's rate limit, a cut connection.
    pub dropped_down: u64,
    pub dropped_fault: u64,
    pub dropped_rate: u64,
    pub dropped_cut: u64,
    /// TCP resets forged and sent (cut connections).
    pub resets_sent: u64,
}

/// The worker's own counters, published to the stats writer through relaxed atomics (the
/// worker is the only writer; a reader may see a mix of two snapshots, which is harmless).
#[derive(Debug, Default)]
pub struct SharedCounters {
    received: AtomicU64,
    passed: AtomicU64,
    dropped_loss: AtomicU64,
    duplicated: AtomicU64,
    reordered: AtomicU64,
    queued_now: AtomicU64,
    max_queued: AtomicU64,
    received_bytes: AtomicU64,
    passed_bytes: AtomicU64,
    dropped_down: AtomicU64,
    dropped_fault: AtomicU64,
    dropped_rate: AtomicU64,
    dropped_cut: AtomicU64,
    resets_sent: AtomicU64,
    /// ENOBUFS errors seen on the netlink socket.
    pub enobufs: AtomicU64,
    down: AtomicBool,
    rate_bps: AtomicU64,
    impaired: AtomicBool,
    cut_connections: AtomicU64,
    armed: AtomicBool,
}

impl SharedCounters {
    pub fn publish(&self, c: &Counters) {
        self.received.store(c.received, Relaxed);
        self.passed.store(c.passed, Relaxed);
        self.dropped_loss.store(c.dropped_loss, Relaxed);
        self.duplicated.store(c.duplicated, Relaxed);
        self.reordered.store(c.reordered, Relaxed);
        self.queued_now.store(c.queued_now, Relaxed);
        self.max_queued.store(c.max_queued, Relaxed);
        self.received_bytes.store(c.received_bytes, Relaxed);
        self.passed_bytes.store(c.passed_bytes, Relaxed);
        self.dropped_down.store(c.dropped_down, Relaxed);
        self.dropped_fault.store(c.dropped_fault, Relaxed);
        self.dropped_rate.store(c.dropped_rate, Relaxed);
        self.dropped_cut.store(c.dropped_cut, Relaxed);
        self.resets_sent.store(c.resets_sent, Relaxed);
    }

    pub fn publish_state(&self, s: &State) {
        self.down.store(s.down, Relaxed);
        self.rate_bps.store(s.rate_bps, Relaxed);
        self.impaired.store(s.impaired, Relaxed);
        self.cut_connections.store(s.cut_connections, Relaxed);
        self.armed.store(s.armed, Relaxed);
    }

    pub fn state(&self) -> State {
        State {
            down: self.down.load(Relaxed),
            rate_bps: self.rate_bps.load(Relaxed),
            impaired: self.impaired.load(Relaxed),
            cut_connections: self.cut_connections.load(Relaxed),
            armed: self.armed.load(Relaxed),
        }
    }

    pub fn snapshot(&self) -> Counters {
        Counters {
            received: self.received.load(Relaxed),
            passed: self.passed.load(Relaxed),
            dropped_loss: self.dropped_loss.load(Relaxed),
            dropped_overflow: 0,
            duplicated: self.duplicated.load(Relaxed),
            reordered: self.reordered.load(Relaxed),
            queued_now: self.queued_now.load(Relaxed),
            max_queued: self.max_queued.load(Relaxed),
            received_bytes: self.received_bytes.load(Relaxed),
            passed_bytes: self.passed_bytes.load(Relaxed),
            dropped_down: self.dropped_down.load(Relaxed),
            dropped_fault: self.dropped_fault.load(Relaxed),
            dropped_rate: self.dropped_rate.load(Relaxed),
            dropped_cut: self.dropped_cut.load(Relaxed),
            resets_sent: self.resets_sent.load(Relaxed),
        }
    }
}

/// Something linkem did at a moment: a command taken, a change in effect, a connection cut.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    pub at_unix: f64,
    pub direction: String,
    pub event: String,
    pub detail: Value,
}

/// The events of the run, shared by the workers and the control thread.
#[derive(Debug, Default)]
pub struct Events {
    list: Mutex<Vec<Event>>,
    dropped: AtomicU64,
}

impl Events {
    pub fn push(&self, direction: &str, event: &str, detail: Value) {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() >= MAX_EVENTS {
            list.remove(0);
            self.dropped.fetch_add(1, Relaxed);
        }
        list.push(Event {
            at_unix: unix_now(),
            direction: direction.to_string(),
            event: event.to_string(),
            detail,
        });
    }

    pub fn snapshot(&self) -> (Vec<Event>, u64) {
        let list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        (list.clone(), self.dropped.load(Relaxed))
    }
}

/// One direction in the stats file: its counters and, under "state", its faults now.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionStats {
    #[serde(flatten)]
    pub counters: Counters,
    pub state: State,
}

/// Kernel counters of one queue from /proc/net/netfilter/nfnetlink_queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelQueueStats {
    pub queue_total: u64,
    pub queue_dropped: u64,
    pub user_dropped: u64,
}

/// Parse /proc/net/netfilter/nfnetlink_queue (per network namespace). Columns: queue_num
/// peer_portid queue_total copy_mode copy_range queue_dropped user_dropped id_sequence 1.
pub fn parse_proc_nfqueue(text: &str) -> BTreeMap<u16, KernelQueueStats> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<u64> = line
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() >= 7 && f[0] <= u16::MAX as u64 {
            out.insert(
                f[0] as u16,
                KernelQueueStats {
                    queue_total: f[2],
                    queue_dropped: f[5],
                    user_dropped: f[6],
                },
            );
        }
    }
    out
}

pub fn read_proc_nfqueue() -> BTreeMap<u16, KernelQueueStats> {
    std::fs::read_to_string("/proc/net/netfilter/nfnetlink_queue")
        .map(|t| parse_proc_nfqueue(&t))
        .unwrap_or_default()
}

/// Overflow drops: queue full plus netlink socket full. Each ENOBUFS stands for one or more
/// `user_dropped` packets, so it only counts when the kernel's counter is not available.
pub fn overflow_drops(k: Option<&KernelQueueStats>, enobufs: u64) -> u64 {
    match k {
        Some(k) => k.queue_dropped + k.user_dropped.max(enobufs),
        None => enobufs,
    }
}

#[derive(Serialize)]
struct StatsFile<'a> {
    updated_at_unix: f64,
    directions: &'a BTreeMap<String, DirectionStats>,
    events: &'a [Event],
    events_dropped: u64,
}

/// Render the stats file's JSON.
pub fn render(
    directions: &BTreeMap<String, DirectionStats>,
    events: &[Event],
    events_dropped: u64,
    updated_at_unix: f64,
) -> String {
    serde_json::to_string(&StatsFile {
        updated_at_unix,
        directions,
        events,
        events_dropped,
    })
    .expect("plain data")
}

/// Write the stats file atomically (temporary file in the same folder, then rename).
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_proc_lines() {
        let text = "   10  12345     3 1     0     7     2      100  1\n   11 999 0 1 0 0 0 5 1\n";
        let m = parse_proc_nfqueue(text);
        assert_eq!(
            m[&10],
            KernelQueueStats {
                queue_total: 3,
                queue_dropped: 7,
                user_dropped: 2
            }
        );
        assert_eq!(m[&11].queue_dropped, 0);
    }

    #[test]
    fn overflow_counts() {
        let k = KernelQueueStats {
            queue_total: 0,
            queue_dropped: 5,
            user_dropped: 3,
        };
        assert_eq!(overflow_drops(Some(&k), 1), 8);
        assert_eq!(overflow_drops(Some(&k), 4), 9);
        assert_eq!(overflow_drops(None, 4), 4);
    }

    #[test]
    fn render_has_contract_keys() {
        let mut m = BTreeMap::new();
        m.insert(
            "forward".to_string(),
            DirectionStats {
                counters: Counters {
                    received: 3,
                    ..Default::default()
                },
                state: State {
                    down: true,
                    ..State::default()
                },
            },
        );
        let events = Events::default();
        events.push("forward", "down", serde_json::json!({"down": true}));
        let (list, dropped) = events.snapshot();
        let v: serde_json::Value = serde_json::from_str(&render(&m, &list, dropped, 12.5)).unwrap();
        assert_eq!(v["updated_at_unix"], 12.5);
        let d = &v["directions"]["forward"];
        for k in [
            "received",
            "passed",
            "dropped_loss",
            "dropped_overflow",
            "duplicated",
            "reordered",
            "queued_now",
            "max_queued",
            "received_bytes",
            "passed_bytes",
            "dropped_down",
            "dropped_fault",
            "dropped_rate",
            "dropped_cut",
            "resets_sent",
        ] {
            assert!(d[k].is_u64(), "{k}");
        }
        assert_eq!(d.as_object().unwrap().len(), 16);
        assert_eq!(d["state"]["down"], true);
        assert_eq!(d["state"]["rate_bps"], 0);
        assert_eq!(v["events"][0]["event"], "down");
        assert_eq!(v["events"][0]["direction"], "forward");
        assert!(v["events"][0]["at_unix"].as_f64().unwrap() > 1e9);
        assert_eq!(v["events_dropped"], 0);
    }

    #[test]
    fn atomic_write_replaces() {
        let dir = std::env::temp_dir().join(format!("linkem-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.json");
        write_atomic(&p, "{\"a\":1}").unwrap();
        write_atomic(&p, "{\"a\":2}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":2}\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
