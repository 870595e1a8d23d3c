//! linkem: a user-space link emulator on NFQUEUE, for kernels without netem.
//!
//! The models (`rng`, `loss`, `delay`, `impair`, `sched`) are pure and tested without root;
//! `nfqueue`, `rawsock` and `worker` are the thin I/O layer; `main.rs` wires them up.

pub mod config;
pub mod delay;
pub mod impair;
pub mod loss;
pub mod nfqueue;
pub mod rawsock;
pub mod rng;
pub mod sched;
pub mod stats;
pub mod worker;
