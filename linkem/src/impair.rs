//! Per-packet decisions for one direction, in netem_enqueue()'s order. Pure: no I/O, no clock.
//!
//! For each packet, in this order (each step draws from the direction's one random stream,
//! `Rng::new(seed, stream_of(name))`, so the sequence of decisions depends only on the seed,
//! the direction's name and the number of packets):
//! 1. duplication: `duplicate >= crandom(dup_cor)` adds a copy;
//! 2. loss: the loss model removes one of the (one or two) copies; none left = dropped;
//! 3. reordering: if `reorder_gap > 0` and at least `gap - 1` packets were delayed since the
//!    last reordered one, `reorder >= crandom(reorder_cor)` sends this packet without delay;
//! 4. otherwise the delay is drawn (delay, jitter, distribution, delay correlation).
//!
//! Like tc, a reorder probability with gap 0 means gap 1.

use crate::config::DirectionConfig;
use crate::delay::DelayModel;
use crate::loss::Loss;
use crate::rng::{prob_to_u32, stream_of, Correlated, Rng};

/// What to do with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Drop it (loss model).
    Drop,
    /// Release it `delay_ns` after arrival; also send one copy if `duplicate`.
    Pass {
        delay_ns: u64,
        duplicate: bool,
        /// Sent ahead of the delayed packets (netem reordering).
        reordered: bool,
    },
}

/// All impairments of one direction, with their random stream and state.
#[derive(Debug, Clone)]
pub struct Impairment {
    rng: Rng,
    loss: Loss,
    delay: DelayModel,
    duplicate: u32,
    dup_cor: Correlated,
    reorder: u32,
    reorder_cor: Correlated,
    gap: u32,
    counter: u32,
}

impl Impairment {
    /// The direction's random stream comes from `seed` and the direction's name.
    pub fn new(cfg: &DirectionConfig, seed: u64) -> Self {
        let gap = if cfg.reorder > 0.0 && cfg.reorder_gap == 0 {
            1
        } else {
            cfg.reorder_gap
        };
        Impairment {
            rng: Rng::new(seed, stream_of(&cfg.name)),
            loss: Loss::new(&cfg.loss),
            delay: DelayModel::new(
                cfg.delay_us,
                cfg.jitter_us,
                cfg.jitter_distribution,
                cfg.delay_correlation,
            ),
            duplicate: prob_to_u32(cfg.duplicate),
            dup_cor: Correlated::new(cfg.duplicate_correlation),
            reorder: prob_to_u32(cfg.reorder),
            reorder_cor: Correlated::new(cfg.reorder_correlation),
            gap,
            counter: 0,
        }
    }

    /// Whether release order always equals arrival order (constant delay, no reordering).
    pub fn is_fifo(&self) -> bool {
        self.delay.is_constant() && self.gap == 0
    }

    /// Decide the fate of the next packet.
    #[inline]
    pub fn decide(&mut self) -> Decision {
        let mut count = 1u8;
        if self.duplicate != 0 && self.duplicate >= self.dup_cor.next(&mut self.rng) {
            count += 1;
        }
        if self.loss.lose(&mut self.rng) {
            count -= 1;
        }
        if count == 0 {
            return Decision::Drop;
        }
        let duplicate = count == 2;
        // netem: `gap == 0 || counter < gap - 1 || reorder < crandom()` keeps the delay.
        if self.gap == 0
            || self.counter < self.gap - 1
            || self.reorder < self.reorder_cor.next(&mut self.rng)
        {
            self.counter = self.counter.saturating_add(1);
            Decision::Pass {
                delay_ns: self.delay.sample_ns(&mut self.rng),
                duplicate,
                reordered: false,
            }
        } else {
            self.counter = 0;
            Decision::Pass {
                delay_ns: 0,
                duplicate,
                reordered: true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn dir(extra: &str) -> DirectionConfig {
        let text = format!(r#"{{"directions":[{{"name":"f","queue":1{extra}}}]}}"#);
        Config::from_json(&text).unwrap().directions.remove(0)
    }

    #[test]
    fn plain_delay_passes_everything() {
        let mut imp = Impairment::new(&dir(r#","delay_us":1000"#), 1);
        assert!(imp.is_fifo());
        for _ in 0..1000 {
            assert_eq!(
                imp.decide(),
                Decision::Pass {
                    delay_ns: 1_000_000,
                    duplicate: false,
                    reordered: false
                }
            );
        }
    }

    #[test]
    fn duplicate_rate() {
        let mut imp = Impairment::new(&dir(r#","duplicate":0.2"#), 1);
        let n = 100_000;
        let d = (0..n)
            .filter(|_| {
                matches!(
                    imp.decide(),
                    Decision::Pass {
                        duplicate: true,
                        ..
                    }
                )
            })
            .count();
        assert!((d as f64 / n as f64 - 0.2).abs() < 0.01, "{d}");
    }

    #[test]
    fn duplicate_and_loss_cancel_like_netem() {
        // Every packet duplicated and every packet "lost": one copy survives.
        let mut imp = Impairment::new(
            &dir(r#","duplicate":1.0,"loss":{"model":"random","p":1.0}"#),
            1,
        );
        for _ in 0..100 {
            assert_eq!(
                imp.decide(),
                Decision::Pass {
                    delay_ns: 0,
                    duplicate: false,
                    reordered: false
                }
            );
        }
    }

    #[test]
    fn reorder_rate_and_gap() {
        // gap 5, reorder 1.0: exactly every fifth packet skips the delay.
        let mut imp = Impairment::new(
            &dir(r#","delay_us":10000,"reorder":1.0,"reorder_gap":5"#),
            1,
        );
        let v: Vec<bool> = (0..20)
            .map(|_| {
                matches!(
                    imp.decide(),
                    Decision::Pass {
                        reordered: true,
                        ..
                    }
                )
            })
            .collect();
        let expect: Vec<bool> = (0..20).map(|i| i % 5 == 4).collect();
        assert_eq!(v, expect);
        // gap 0 means 1 (tc): every packet is a candidate.
        let mut imp = Impairment::new(&dir(r#","delay_us":10000,"reorder":0.25"#), 1);
        assert!(!imp.is_fifo());
        let n = 100_000;
        let r = (0..n)
            .filter(|_| {
                matches!(
                    imp.decide(),
                    Decision::Pass {
                        reordered: true,
                        delay_ns: 0,
                        ..
                    }
                )
            })
            .count();
        assert!((r as f64 / n as f64 - 0.25).abs() < 0.01, "{r}");
    }
}
