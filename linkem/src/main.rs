//! linkem daemon: `linkem --config CONFIG.json`.
//!
//! Exit codes: 0 after SIGTERM/SIGINT (all held packets released), 2 for a bad config or
//! command line, 1 for a runtime error (e.g. the queue cannot be bound).

use linkem::config::Config;
use linkem::control;
use linkem::stats::{self, DirectionStats, Events};
use linkem::worker::{Links, Worker};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    // Every worker gets an inbox; each knows the others' (to cut a connection everywhere).
    let events = Arc::new(Events::default());
    let channels: Vec<_> = workers.iter().map(|_| std::sync::mpsc::channel()).collect();
    let senders: Vec<_> = channels.iter().map(|(tx, _)| tx.clone()).collect();
    let mut inboxes = BTreeMap::new();
    for ((w, (_, inbox)), i) in workers.iter_mut().zip(channels).zip(0..) {
        inboxes.insert(w.name.clone(), senders[i].clone());
        let peers = (0..senders.len())
            .filter(|&j| j != i)
            .map(|j| senders[j].clone())
            .collect();
        w.connect(Links {
            inbox,
            peers,
            events: Arc::clone(&events),
        });
    }
    let control_path = cfg.control_path.as_ref().map(PathBuf::from);
    let listener = match &control_path {
        Some(path) => match control::bind(path) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("linkem: control socket {}: {e}", path.display());
                return 1;
            }
        },
        None => None,
    };
    let stats_path = PathBuf::from(&cfg.stats_path);
    if let Err(e) = write_stats(&stats_path, &shared, &events) {
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

    let controller = listener.map(|listener| {
        let shared = shared.clone();
        let events = Arc::clone(&events);
        std::thread::Builder::new()
            .name("linkem-control".into())
            .spawn(move || {
                let stats = || render_stats(&shared, &events);
                control::serve(&listener, &inboxes, &STOP, &stats);
            })
            .expect("spawn control thread")
    });

    let interval = Duration::from_millis(cfg.stats_interval_ms);
    let mut next = Instant::now() + interval;
    while !STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            if let Err(e) = write_stats(&stats_path, &shared, &events) {
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

    if let Some(c) = controller {
        let _ = c.join();
    }
    if let Some(path) = &control_path {
        let _ = std::fs::remove_file(path);
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
    if let Err(e) = write_stats(&stats_path, &shared, &events) {
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

type Shared = (String, u16, Arc<linkem::stats::SharedCounters>);

fn render_stats(shared: &[Shared], events: &Events) -> String {
    let kernel = stats::read_proc_nfqueue();
    let mut dirs: BTreeMap<String, DirectionStats> = BTreeMap::new();
    for (name, queue, s) in shared {
        let mut counters = s.snapshot();
        counters.dropped_overflow =
            stats::overflow_drops(kernel.get(queue), s.enobufs.load(Ordering::Relaxed));
        let state = s.state();
        dirs.insert(name.clone(), DirectionStats { counters, state });
    }
    let (list, dropped) = events.snapshot();
    stats::render(&dirs, &list, dropped, stats::unix_now())
}

fn write_stats(path: &Path, shared: &[Shared], events: &Events) -> std::io::Result<()> {
    stats::write_atomic(path, &render_stats(shared, events))
}
