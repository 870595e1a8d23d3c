//! The control channel: a Unix stream socket (`control_path` in the config) taking one JSON
//! command per line and answering each with one JSON line. The harness changes a direction
//! while linkem runs (faults), and reads fresh counters, through it:
//!
//! ```text
//! {"cmd":"set","direction":"forward","down":true}                    -> the link is down
//! {"cmd":"set","direction":"forward","rate_bps":1000000,"queue_bytes":125000}
//! {"cmd":"set","direction":"forward","impair":{"delay_us":150000,"loss":{"model":"random","p":0.1}}}
//! {"cmd":"reset","direction":"forward","after_bytes":1000000}         -> cut the connection
//! {"cmd":"restore","direction":"forward"}                             -> as configured again
//! {"cmd":"stats"}                                                     -> the stats file's JSON
//! ```
//!
//! `set` and `reset` take `after_bytes` (default 0: at once): the change waits until that
//! much TCP payload has crossed the direction. Answers: `{"ok":true,"at_unix":..,"direction":
//! ..,"armed":..,"state":{..}}` once the direction's worker took the command (or armed it),
//! or `{"ok":false,"error":".."}`. Every command and every change that took effect is also
//! an event in the stats file, with its time: the record of what linkem did.

use crate::fault::{Action, ImpairPatch, Patch};
use crate::tcp::Ends;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

/// How long the control thread waits for a worker to take a command (a worker checks its
/// messages at least every 20 ms).
const WORKER_REPLY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "lowercase", deny_unknown_fields)]
pub enum Command {
    Set {
        direction: String,
        #[serde(default)]
        after_bytes: u64,
        down: Option<bool>,
        rate_bps: Option<u64>,
        queue_bytes: Option<u64>,
        impair: Option<ImpairPatch>,
    },
    Reset {
        direction: String,
        #[serde(default)]
        after_bytes: u64,
    },
    Restore {
        direction: String,
    },
    Stats,
}

impl Command {
    pub fn parse(line: &str) -> Result<Command, String> {
        let de = &mut serde_json::Deserializer::from_str(line);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                format!("command: {inner}")
            } else {
                format!("command key `{path}`: {inner}")
            }
        })
    }

    /// (direction, action, after_bytes) of a command for one direction.
    pub fn for_direction(self) -> Option<(String, Action, u64)> {
        match self {
            Command::Set {
                direction,
                after_bytes,
                down,
                rate_bps,
                queue_bytes,
                impair,
            } => Some((
                direction,
                Action::Set(Patch {
                    down,
                    rate_bps,
                    queue_bytes,
                    impair,
                }),
                after_bytes,
            )),
            Command::Reset {
                direction,
                after_bytes,
            } => Some((direction, Action::Reset, after_bytes)),
            Command::Restore { direction } => Some((direction, Action::Restore, 0)),
            Command::Stats => None,
        }
    }
}

/// A direction's state as answers and the stats file show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct State {
    pub down: bool,
    /// 0: no rate limit.
    pub rate_bps: u64,
    /// Delay and loss other than configured.
    pub impaired: bool,
    pub cut_connections: u64,
    /// A command waits for its `after_bytes`.
    pub armed: bool,
}

/// What a worker is told.
pub enum Msg {
    Command {
        action: Action,
        after_bytes: u64,
        reply: Sender<Result<State, String>>,
    },
    /// Another direction cut this connection.
    Cut(Ends),
}

/// Handle one command line; `stats` renders the stats file's JSON.
pub fn answer(
    line: &str,
    workers: &BTreeMap<String, Sender<Msg>>,
    stats: &dyn Fn() -> String,
) -> String {
    let command = match Command::parse(line) {
        Ok(c) => c,
        Err(e) => return failed(&e),
    };
    let Some((direction, action, after_bytes)) = command.for_direction() else {
        return stats();
    };
    let Some(worker) = workers.get(&direction) else {
        let known: Vec<&str> = workers.keys().map(String::as_str).collect();
        return failed(&format!(
            "no direction named {direction:?}; linkem has {}",
            known.join(", ")
        ));
    };
    let (tx, rx) = mpsc::channel();
    let msg = Msg::Command {
        action,
        after_bytes,
        reply: tx,
    };
    if worker.send(msg).is_err() {
        return failed(&format!("direction {direction:?} has stopped"));
    }
    match rx.recv_timeout(WORKER_REPLY) {
        Ok(Ok(state)) => json!({
            "ok": true,
            "at_unix": crate::stats::unix_now(),
            "direction": direction,
            "armed": state.armed,
            "state": state,
        })
        .to_string(),
        Ok(Err(e)) => failed(&e),
        Err(_) => failed(&format!("direction {direction:?} did not answer")),
    }
}

fn failed(error: &str) -> String {
    json!({"ok": false, "error": error}).to_string()
}

/// Bind the control socket (a stale socket file at the path is replaced; any other file is
/// an error).
pub fn bind(path: &std::path::Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.file_type().is_socket() {
            std::fs::remove_file(path)?;
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
    }
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serve connections until `stop` is set, one at a time, each line a command.
pub fn serve(
    listener: &UnixListener,
    workers: &BTreeMap<String, Sender<Msg>>,
    stop: &AtomicBool,
    stats: &dyn Fn() -> String,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = session(stream, workers, stop, stats) {
                    eprintln!("linkem: control connection: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                eprintln!("linkem: control socket: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn session(
    stream: UnixStream,
    workers: &BTreeMap<String, Sender<Msg>>,
    stop: &AtomicBool,
    stats: &dyn Fn() -> String,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut idle = 0;
    while !stop.load(Ordering::Relaxed) {
        match reader.read_line(&mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                idle = 0;
                if !line.trim().is_empty() {
                    let reply = answer(line.trim(), workers, stats);
                    out.write_all(reply.as_bytes())?;
                    out.write_all(b"\n")?;
                }
                line.clear();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // A client that keeps the connection open but silent is left after 10 s,
                // so that another can connect.
                idle += 1;
                if idle > 50 {
                    return Ok(());
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A JSON value for an event's detail.
pub fn detail(pairs: &[(&str, Value)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_command() {
        let c = Command::parse(r#"{"cmd":"set","direction":"forward","down":true}"#).unwrap();
        let (d, a, n) = c.for_direction().unwrap();
        assert_eq!((d.as_str(), n), ("forward", 0));
        assert_eq!(
            a,
            Action::Set(Patch {
                down: Some(true),
                ..Patch::default()
            })
        );
        let c = Command::parse(r#"{"cmd":"reset","direction":"r","after_bytes":5}"#).unwrap();
        assert_eq!(c.for_direction().unwrap().1, Action::Reset);
        let c = Command::parse(r#"{"cmd":"restore","direction":"r"}"#).unwrap();
        assert_eq!(c.for_direction().unwrap().1, Action::Restore);
        assert_eq!(
            Command::parse(r#"{"cmd":"stats"}"#).unwrap(),
            Command::Stats
        );
        let c = Command::parse(
            r#"{"cmd":"set","direction":"f","impair":{"delay_us":5,"loss":{"model":"random","p":0.1}}}"#,
        )
        .unwrap();
        assert!(matches!(
            c,
            Command::Set {
                impair: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn unknown_commands_and_keys_are_refused_by_name() {
        let e = Command::parse(r#"{"cmd":"explode","direction":"f"}"#).unwrap_err();
        assert!(e.contains("explode"), "{e}");
        let e = Command::parse(r#"{"cmd":"set","direction":"f","dwon":true}"#).unwrap_err();
        assert!(e.contains("dwon"), "{e}");
        let e =
            Command::parse(r#"{"cmd":"set","direction":"f","impair":{"delay":5}}"#).unwrap_err();
        assert!(e.contains("delay"), "{e}");
        assert!(Command::parse("not json").is_err());
    }

    #[test]
    fn answers_name_the_problem() {
        let workers = BTreeMap::new();
        let stats = || "{}".to_string();
        let v: Value = serde_json::from_str(&answer(
            r#"{"cmd":"restore","direction":"x"}"#,
            &workers,
            &stats,
        ))
        .unwrap();
        assert_eq!(v["ok"], false);
        assert!(v["error"].as_str().unwrap().contains("no direction named"));
        assert_eq!(answer(r#"{"cmd":"stats"}"#, &workers, &stats), "{}");
    }

    #[test]
    fn a_worker_answers_through_the_channel() {
        let (tx, rx) = mpsc::channel();
        let mut workers = BTreeMap::new();
        workers.insert("forward".to_string(), tx);
        let t = std::thread::spawn(move || {
            if let Ok(Msg::Command { reply, .. }) = rx.recv() {
                reply
                    .send(Ok(State {
                        down: true,
                        ..State::default()
                    }))
                    .unwrap();
            }
        });
        let stats = || String::new();
        let v: Value = serde_json::from_str(&answer(
            r#"{"cmd":"set","direction":"forward","down":true}"#,
            &workers,
            &stats,
        ))
        .unwrap();
        t.join().unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["state"]["down"], true);
        assert_eq!(v["direction"], "forward");
    }
}
