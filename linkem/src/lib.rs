//! linkem: a user-space link emulator on NFQUEUE, for kernels without netem.
//!
//! The models (`rng`, `loss`, `delay`, `impair`, `sched`) and the faults (`fault`: link down,
//! rate limit, other impairments, connections cut; `tcp`: headers and forged resets) are pure
//! and tested without root; `nfqueue`, `rawsock`, `worker` and `control` (the runtime control
//! socket) are the thin I/O layer; `main.rs` wires them up.

pub mod config;
pub mod control;
pub mod delay;
pub mod fault;
pub mod impair;
pub mod loss;
pub mod nfqueue;
pub mod rawsock;
pub mod rng;
pub mod sched;
pub mod stats;
pub mod tcp;
pub mod worker;
