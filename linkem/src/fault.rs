//! Faults of one direction while linkem runs: the link down (everything dropped), a rate
//! limit, other delay and loss, and TCP connections cut by forged resets. Pure: the worker
//! hands in each packet's headers and the clock, and acts on the `Judged` it gets back.
//!
//! Changes come as `Action`s from the control channel (control.rs), at once or armed to fire
//! once the direction has carried `after_bytes` more bytes of TCP payload (any connection).
//! A reset cuts one connection: the one the firing packet belongs to, or (at once) the one of
//! the last packet with data in this direction. From then on every packet of that connection,
//! either way, is dropped and answered with a reset to its sender whose sequence number is
//! the packet's acknowledgment number: exactly what that end expects next (tcp.rs), so its
//! socket takes the reset whatever was in flight. At the cut both ends get one at once.
//! A reset at once is refused when the last connection with data has closed since (a FIN
//! or a reset crossed this direction): resets to a connection that is gone cut nothing,
//! and the harness would measure "healing" from a fault that never touched a transfer.

use crate::config::{DirectionConfig, JitterDistribution, LossConfig};
use crate::impair::Impairment;
use crate::tcp::{Ends, Packet, Segment, ACK, FIN, RST};
use serde::Deserialize;

/// Other delay and loss for a while: the keys given replace the configured ones.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ImpairPatch {
    pub delay_us: Option<u64>,
    pub jitter_us: Option<u64>,
    pub jitter_distribution: Option<JitterDistribution>,
    pub delay_correlation: Option<f64>,
    pub loss: Option<LossConfig>,
}

/// A change of state; keys left out keep their current value.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// Drop every packet (the link is down) or not.
    pub down: Option<bool>,
    /// Limit the rate to this many bits per second; 0 removes the limit.
    pub rate_bps: Option<u64>,
    /// The bottleneck's queue under a rate limit, in bytes (default: 100 ms at the rate).
    pub queue_bytes: Option<u64>,
    pub impair: Option<ImpairPatch>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Set(Patch),
    Reset,
    /// Back to the configuration: link up, no rate limit, configured impairments, no cuts.
    Restore,
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Set(_) => "set",
            Action::Reset => "reset",
            Action::Restore => "restore",
        }
    }

    /// Whether it needs packet headers (lengths, TCP) to work.
    pub fn needs_headers(&self, after_bytes: u64) -> bool {
        after_bytes > 0
            || matches!(self, Action::Reset)
            || matches!(self, Action::Set(p) if p.rate_bps.unwrap_or(0) > 0)
    }
}

/// A serial bottleneck of `bps` with a queue of at most `queue_ns` of sending time: a packet
/// leaves it once the packets before it have, plus its own transmission time.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimiter {
    pub bps: u64,
    queue_ns: u64,
    free_at: u64,
}

impl RateLimiter {
    pub fn new(bps: u64, queue_bytes: Option<u64>) -> Self {
        let bytes = queue_bytes.unwrap_or((bps / 80).max(3 * 1514));
        RateLimiter {
            bps,
            queue_ns: tx_ns(bytes, bps),
            free_at: 0,
        }
    }

    /// When a packet of `len` bytes arriving at `now` has left the bottleneck, or None when
    /// the queue is full (dropped at its tail).
    pub fn admit(&mut self, now: u64, len: u32) -> Option<u64> {
        let start = self.free_at.max(now);
        if start - now > self.queue_ns {
            return None;
        }
        self.free_at = start + tx_ns(u64::from(len), self.bps);
        Some(self.free_at)
    }
}

fn tx_ns(bytes: u64, bps: u64) -> u64 {
    (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(bps.max(1))) as u64
}

/// A reset to forge: from `ends.src` to `ends.dst`, sequence number `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forge {
    pub ends: Ends,
    pub seq: u32,
}

/// What becomes of one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// On to the impairments (and the rate limit).
    Pass,
    /// Dropped because the link is down.
    Down,
    /// Dropped because its connection is cut; answered with `resets`. `new_cut`: this packet
    /// cut it (an armed reset fired), so the other directions must learn of it.
    Cut {
        resets: Vec<Forge>,
        new_cut: Option<Ends>,
    },
}

/// The fault state of one direction.
#[derive(Debug, Default)]
pub struct Faults {
    pub down: bool,
    pub rate: Option<RateLimiter>,
    /// Delay and loss in place of the configured ones (an `impair` patch).
    pub impair: Option<Impairment>,
    /// Cut connections (`Ends::flow`).
    pub cuts: Vec<Ends>,
    armed: Option<(Action, u64)>,
    last_data: Option<Segment>,
    /// The connection of `last_data` has closed since: a FIN or a reset of it crossed here.
    last_closed: bool,
    /// An armed `set` or `restore` that fired on the last packet judged (an event to log).
    fired: Option<&'static str>,
}

impl Faults {
    pub fn armed(&self) -> bool {
        self.armed.is_some()
    }

    /// The armed command that fired on the last packet judged, once.
    pub fn take_fired(&mut self) -> Option<&'static str> {
        self.fired.take()
    }

    /// Take `action` at once (`after_bytes` 0) or once that much TCP payload has passed.
    /// Returns the resets to send now (a reset at once), or why it cannot be done.
    pub fn command(
        &mut self,
        action: Action,
        after_bytes: u64,
        base: &DirectionConfig,
        seed: u64,
    ) -> Result<Vec<Forge>, String> {
        if let Action::Set(patch) = &action {
            check_patch(patch, base)?;
        }
        if after_bytes > 0 {
            self.armed = Some((action, after_bytes));
            return Ok(Vec::new());
        }
        match action {
            Action::Reset => {
                let last = self.last_data.ok_or_else(|| {
                    "no TCP segment with data has crossed this direction yet: nothing to reset"
                        .to_string()
                })?;
                if self.last_closed {
                    return Err(format!(
                        "the last connection with data here ({}) has closed (a FIN or a \
                         reset crossed): nothing to reset",
                        last.ends.describe()
                    ));
                }
                self.cut(last.ends);
                Ok(vec![
                    Forge {
                        ends: last.ends.reversed(),
                        seq: last.ack,
                    },
                    Forge {
                        ends: last.ends,
                        seq: last.seq_end(),
                    },
                ])
            }
            other => {
                self.apply(other, base, seed);
                Ok(Vec::new())
            }
        }
    }

    /// Another direction cut a connection: drop its packets here too.
    pub fn cut(&mut self, ends: Ends) {
        let flow = ends.flow();
        if !self.cuts.contains(&flow) {
            self.cuts.push(flow);
        }
    }

    fn apply(&mut self, action: Action, base: &DirectionConfig, seed: u64) {
        match action {
            Action::Restore => {
                *self = Faults {
                    last_data: self.last_data,
                    last_closed: self.last_closed,
                    ..Faults::default()
                }
            }
            Action::Set(patch) => {
                if let Some(down) = patch.down {
                    self.down = down;
                }
                match patch.rate_bps {
                    Some(0) => self.rate = None,
                    Some(bps) => self.rate = Some(RateLimiter::new(bps, patch.queue_bytes)),
                    None => {}
                }
                if let Some(imp) = patch.impair {
                    self.impair = Some(Impairment::new(&patched(base, &imp), seed));
                }
            }
            Action::Reset => unreachable!("resets are cut by the packet that fires them"),
        }
    }

    /// Judge one packet (`pkt`: its headers, when the direction inspects them).
    pub fn judge(&mut self, pkt: Option<&Packet>, base: &DirectionConfig, seed: u64) -> Judged {
        if let Some(seg) = pkt.and_then(|p| p.tcp) {
            if !self.cuts.is_empty() && self.cuts.contains(&seg.ends.flow()) {
                return Judged::Cut {
                    resets: answer(&seg).into_iter().collect(),
                    new_cut: None,
                };
            }
            if seg.payload > 0 {
                self.last_data = Some(seg);
                self.last_closed = false;
            }
            if seg.flags & (FIN | RST) != 0
                && self
                    .last_data
                    .is_some_and(|d| d.ends.flow() == seg.ends.flow())
            {
                self.last_closed = true;
            }
            if let Some((action, left)) = self.armed.take() {
                if u64::from(seg.payload) < left {
                    self.armed = Some((action, left - u64::from(seg.payload)));
                } else if action == Action::Reset {
                    self.cut(seg.ends);
                    let mut resets: Vec<Forge> = answer(&seg).into_iter().collect();
                    resets.push(Forge {
                        ends: seg.ends,
                        seq: seg.seq,
                    });
                    return Judged::Cut {
                        resets,
                        new_cut: Some(seg.ends),
                    };
                } else {
                    self.fired = Some(action.name());
                    self.apply(action, base, seed);
                }
            }
        }
        if self.down {
            Judged::Down
        } else {
            Judged::Pass
        }
    }
}

/// The reset that answers a packet of a cut connection: to its sender, at its ack number.
fn answer(seg: &Segment) -> Option<Forge> {
    (seg.flags & RST == 0 && seg.flags & ACK != 0).then_some(Forge {
        ends: seg.ends.reversed(),
        seq: seg.ack,
    })
}

fn check_patch(patch: &Patch, base: &DirectionConfig) -> Result<(), String> {
    if let Some(imp) = &patch.impair {
        // The same checks as the configuration file's, on the patched direction.
        let cfg = crate::config::Config {
            seed: 0,
            stats_path: "x".into(),
            stats_interval_ms: 1,
            control_path: None,
            directions: vec![patched(base, imp)],
        };
        cfg.validate()
            .map_err(|e| e.0.replace("directions[0].", "impair."))?;
    }
    if patch.queue_bytes.is_some() && patch.rate_bps.unwrap_or(0) == 0 {
        return Err("queue_bytes needs a rate_bps above 0".into());
    }
    Ok(())
}

/// The direction with an impair patch over it; its random stream is its own (named after
/// the direction and "fault"), so the configured stream is not disturbed.
pub fn patched(base: &DirectionConfig, imp: &ImpairPatch) -> DirectionConfig {
    let mut cfg = base.clone();
    cfg.name = format!("{} fault", base.name);
    if let Some(v) = imp.delay_us {
        cfg.delay_us = v;
    }
    if let Some(v) = imp.jitter_us {
        cfg.jitter_us = v;
    }
    if let Some(v) = imp.jitter_distribution {
        cfg.jitter_distribution = v;
    }
    if let Some(v) = imp.delay_correlation {
        cfg.delay_correlation = v;
    }
    if let Some(v) = &imp.loss {
        cfg.loss = v.clone();
    }
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::impair::Decision;
    use crate::tcp::SYN;
    use std::net::{IpAddr, Ipv4Addr};

    fn base() -> DirectionConfig {
        Config::from_json(r#"{"directions":[{"name":"forward","queue":10,"delay_us":1000}]}"#)
            .unwrap()
            .directions
            .remove(0)
    }

    const PRIMARY: Ends = Ends {
        src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 6)),
        sport: 53,
        dport: 40000,
    };

    fn data(seq: u32, ack: u32, payload: u32) -> Packet {
        Packet {
            len: payload + 52,
            tcp: Some(Segment {
                ends: PRIMARY,
                seq,
                ack,
                flags: ACK,
                payload,
            }),
        }
    }

    fn ack_back(ack: u32, seq: u32) -> Packet {
        Packet {
            len: 52,
            tcp: Some(Segment {
                ends: PRIMARY.reversed(),
                seq,
                ack,
                flags: ACK,
                payload: 0,
            }),
        }
    }

    #[test]
    fn down_drops_until_restored() {
        let (b, mut f) = (base(), Faults::default());
        assert_eq!(f.judge(None, &b, 1), Judged::Pass);
        let down = Patch {
            down: Some(true),
            ..Patch::default()
        };
        f.command(Action::Set(down), 0, &b, 1).unwrap();
        assert_eq!(f.judge(None, &b, 1), Judged::Down);
        assert_eq!(f.judge(Some(&data(1, 1, 100)), &b, 1), Judged::Down);
        f.command(Action::Restore, 0, &b, 1).unwrap();
        assert_eq!(f.judge(None, &b, 1), Judged::Pass);
    }

    #[test]
    fn reset_now_cuts_the_last_data_connection_both_ways() {
        let (b, mut f) = (base(), Faults::default());
        let e = f.command(Action::Reset, 0, &b, 1).unwrap_err();
        assert!(e.contains("nothing to reset"), "{e}");
        assert_eq!(f.judge(Some(&data(1000, 77, 1448)), &b, 1), Judged::Pass);
        assert_eq!(f.judge(Some(&ack_back(2448, 77)), &b, 1), Judged::Pass);
        let resets = f.command(Action::Reset, 0, &b, 1).unwrap();
        // To the primary at what it expects from the secondary (77); to the secondary
        // right after the last data it was sent (2448).
        assert_eq!(
            resets,
            vec![
                Forge {
                    ends: PRIMARY.reversed(),
                    seq: 77
                },
                Forge {
                    ends: PRIMARY,
                    seq: 2448
                }
            ]
        );
        // The secondary's next ACK is dropped and answered at its own ack number.
        assert_eq!(
            f.judge(Some(&ack_back(2448, 77)), &b, 1),
            Judged::Cut {
                resets: vec![Forge {
                    ends: PRIMARY,
                    seq: 2448
                }],
                new_cut: None
            }
        );
        // Another connection passes.
        let mut other = data(5, 5, 10);
        other.tcp.as_mut().unwrap().ends.dport = 40001;
        assert_eq!(f.judge(Some(&other), &b, 1), Judged::Pass);
    }

    #[test]
    fn reset_now_is_refused_once_the_last_data_connection_closed() {
        let (b, mut f) = (base(), Faults::default());
        assert_eq!(f.judge(Some(&data(1000, 77, 1448)), &b, 1), Judged::Pass);
        let mut fin = data(2448, 77, 0);
        fin.tcp.as_mut().unwrap().flags = FIN | ACK;
        assert_eq!(f.judge(Some(&fin), &b, 1), Judged::Pass);
        let e = f.command(Action::Reset, 0, &b, 1).unwrap_err();
        assert!(
            e.contains("has closed") && e.contains("nothing to reset"),
            "{e}"
        );
        assert!(f.cuts.is_empty());
        // A new connection's data is the one to cut; a FIN of another says nothing of it.
        let mut other = data(5, 5, 10);
        other.tcp.as_mut().unwrap().ends.dport = 40001;
        assert_eq!(f.judge(Some(&other), &b, 1), Judged::Pass);
        assert_eq!(f.judge(Some(&fin), &b, 1), Judged::Pass);
        let resets = f.command(Action::Reset, 0, &b, 1).unwrap();
        assert_eq!(resets[1].ends.dport, 40001);
    }

    #[test]
    fn armed_reset_fires_on_the_packet_that_crosses_the_bytes() {
        let (b, mut f) = (base(), Faults::default());
        assert!(f.command(Action::Reset, 3000, &b, 1).unwrap().is_empty());
        assert!(f.armed());
        assert_eq!(f.judge(Some(&data(0, 9, 1448)), &b, 1), Judged::Pass);
        assert_eq!(f.judge(Some(&ack_back(1448, 9)), &b, 1), Judged::Pass); // no payload
        assert_eq!(f.judge(Some(&data(1448, 9, 1448)), &b, 1), Judged::Pass);
        match f.judge(Some(&data(2896, 9, 1448)), &b, 1) {
            Judged::Cut { resets, new_cut } => {
                assert_eq!(new_cut, Some(PRIMARY));
                assert_eq!(
                    resets,
                    vec![
                        Forge {
                            ends: PRIMARY.reversed(),
                            seq: 9
                        },
                        Forge {
                            ends: PRIMARY,
                            seq: 2896
                        }
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(!f.armed());
        assert_eq!(f.cuts, vec![PRIMARY.flow()]);
    }

    #[test]
    fn resets_and_syns_are_not_answered() {
        let (b, mut f) = (base(), Faults::default());
        f.cut(PRIMARY);
        let mut p = data(1, 1, 0);
        p.tcp.as_mut().unwrap().flags = RST;
        assert_eq!(
            f.judge(Some(&p), &b, 1),
            Judged::Cut {
                resets: vec![],
                new_cut: None
            }
        );
        p.tcp.as_mut().unwrap().flags = SYN;
        assert!(
            matches!(f.judge(Some(&p), &b, 1), Judged::Cut { resets, .. } if resets.is_empty())
        );
    }

    #[test]
    fn armed_down_applies_from_the_crossing_packet() {
        let (b, mut f) = (base(), Faults::default());
        let down = Patch {
            down: Some(true),
            ..Patch::default()
        };
        f.command(Action::Set(down), 100, &b, 1).unwrap();
        assert_eq!(f.judge(Some(&data(0, 0, 99)), &b, 1), Judged::Pass);
        assert_eq!(f.take_fired(), None);
        assert_eq!(f.judge(Some(&data(99, 0, 1)), &b, 1), Judged::Down);
        assert_eq!(f.take_fired(), Some("set"));
        assert_eq!(f.take_fired(), None);
        assert_eq!(f.judge(None, &b, 1), Judged::Down);
    }

    #[test]
    fn rate_limiter_serializes_and_tail_drops() {
        // 8 Mbit/s: 1000 bytes take 1 ms; a queue of 3000 bytes is 3 ms.
        let mut r = RateLimiter::new(8_000_000, Some(3000));
        assert_eq!(r.admit(0, 1000), Some(1_000_000));
        assert_eq!(r.admit(0, 1000), Some(2_000_000));
        assert_eq!(r.admit(0, 1000), Some(3_000_000));
        assert_eq!(r.admit(0, 1000), Some(4_000_000)); // waits 3 ms: the queue is full
        assert_eq!(r.admit(0, 1000), None);
        // Idle again: no queue.
        assert_eq!(r.admit(10_000_000, 500), Some(10_500_000));
    }

    #[test]
    fn impair_patch_replaces_loss_and_delay_and_restore_undoes() {
        let (b, mut f) = (base(), Faults::default());
        let patch = Patch {
            impair: Some(ImpairPatch {
                delay_us: Some(150_000),
                loss: Some(LossConfig::Random {
                    p: 1.0,
                    correlation: 0.0,
                }),
                ..ImpairPatch::default()
            }),
            ..Patch::default()
        };
        f.command(Action::Set(patch), 0, &b, 7).unwrap();
        assert_eq!(f.impair.as_mut().unwrap().decide(), Decision::Drop);
        f.command(Action::Restore, 0, &b, 7).unwrap();
        assert!(f.impair.is_none());
    }

    #[test]
    fn bad_patches_are_refused_with_their_key() {
        let (b, mut f) = (base(), Faults::default());
        let patch = Patch {
            impair: Some(ImpairPatch {
                loss: Some(LossConfig::Random {
                    p: 10.0,
                    correlation: 0.0,
                }),
                ..ImpairPatch::default()
            }),
            ..Patch::default()
        };
        let e = f.command(Action::Set(patch), 0, &b, 1).unwrap_err();
        assert!(e.contains("impair.loss.p"), "{e}");
        let patch = Patch {
            queue_bytes: Some(10),
            ..Patch::default()
        };
        assert!(f.command(Action::Set(patch), 0, &b, 1).is_err());
    }
}
