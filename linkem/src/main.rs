//! linkem daemon: `linkem --config CONFIG.json`.
//!
//! Exit codes: 0 after SIGTERM/SIGINT (all held packets released), 2 for a bad config or
//! command line, 1 for a runtime error (e.g. the queue cannot be bound).

use linkem::config::Config;
use linkem::stats::{self, Counters};
use linkem::worker::Worker;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Set by the signal handler; workers and the stats loop poll it.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Netlink receive buffer: large enough that bursts never overflow it (no ENOBUFS stalls).
const RCVBUF: usize = 64 << 20;

const USAGE: &str = "usage: linkem --config CONFIG.json";

fn main() {
    std::process::exit(real_main());
}

fn real_main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config_path = match args.as_slice() {
        [flag, path] if flag == "--config" => PathBuf::from(path),
        [flag] if flag == "--version" => {
            println!("linkem {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        [flag] if flag == "--help" || flag == "-h" => {
            println!("{USAGE}");
            return 0;
        }
        _ => {
            eprintln!("linkem: {USAGE}");
            return 2;
        }
    };
    let cfg = match Config::from_file(&config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("linkem: {}: {e}", config_path.display());
            return 2;
        }
    };
    install_signal_handlers();

    // Bind every queue before reporting ready.
    let mut workers = Vec::new();
    for d in &cfg.directions {
        match Worker::new(d, cfg.seed, RCVBUF) {
            Ok(w) => workers.push(w),
            Err(e) => {
                eprintln!("linkem: direction {:?}: {e}", d.name);
                return 1;
            }
        }
    }
    let shared: Vec<_> = workers
        .iter()
        .map(|w| (w.name.clone(), w.queue_num(), Arc::clone(&w.shared)))
        .collect();
    let stats_path = PathBuf::from(&cfg.stats_path);
    if let Err(e) = write_stats(&stats_path, &shared) {
        eprintln!(
            "linkem: cannot write stats file {}: {e}",
            stats_path.display()
        );
        return 1;
    }
    println!("linkem ready");
    let _ = std::io::stdout().flush();

    let handles: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            std::thread::Builder::new()
                .name(format!("linkem-{}", w.name))
                .spawn(move || {
                    let r = w.run(&STOP);
                    if r.is_err() {
                        // One direction failing ends the run; the others release their packets.
                        STOP.store(true, Ordering::Relaxed);
                    }
                    (w, r)
                })
                .expect("spawn worker thread")
        })
        .collect();

    let interval = Duration::from_millis(cfg.stats_interval_ms);
    let mut next = Instant::now() + interval;
    while !STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            if let Err(e) = write_stats(&stats_path, &shared) {
                eprintln!(
                    "linkem: cannot write stats file {}: {e}",
                    stats_path.display()
                );
            }
            next += interval;
            if next < now {
                next = now + interval;
            }
        }
        std::thread::sleep(
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20)),
        );
    }

    let mut code = 0;
    let mut finished = Vec::new();
    for h in handles {
        match h.join() {
            Ok((w, r)) => {
                if let Err(e) = r {
                    eprintln!("linkem: direction {:?}: {e}", w.name);
                    code = 1;
                }
                finished.push(w);
            }
            Err(_) => code = 1,
        }
    }
    // Final stats while the queues are still bound (their kernel counters vanish on unbind).
    if let Err(e) = write_stats(&stats_path, &shared) {
        eprintln!(
            "linkem: cannot write stats file {}: {e}",
            stats_path.display()
        );
        code = 1;
    }
    drop(finished);
    code
}

fn install_signal_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // A closed stdout must not kill us.
    // SAFETY: setting a signal disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

fn write_stats(
    path: &Path,
    shared: &[(String, u16, Arc<linkem::stats::SharedCounters>)],
) -> std::io::Result<()> {
    let kernel = stats::read_proc_nfqueue();
    let mut dirs: BTreeMap<String, Counters> = BTreeMap::new();
    for (name, queue, s) in shared {
        let mut c = s.snapshot();
        c.dropped_overflow =
            stats::overflow_drops(kernel.get(queue), s.enobufs.load(Ordering::Relaxed));
        dirs.insert(name.clone(), c);
    }
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    stats::write_atomic(path, &stats::render(&dirs, t))
}
