//! Counters, the stats file and the kernel's per-queue drop counters.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
    /// ENOBUFS errors seen on the netlink socket.
    pub enobufs: AtomicU64,
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
        }
    }
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
    directions: &'a BTreeMap<String, Counters>,
}

/// Render the stats file's JSON.
pub fn render(directions: &BTreeMap<String, Counters>, updated_at_unix: f64) -> String {
    serde_json::to_string(&StatsFile {
        updated_at_unix,
        directions,
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
            Counters {
                received: 3,
                ..Default::default()
            },
        );
        let v: serde_json::Value = serde_json::from_str(&render(&m, 12.5)).unwrap();
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
        ] {
            assert!(d[k].is_u64(), "{k}");
        }
        assert_eq!(d.as_object().unwrap().len(), 8);
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
