//! Loss models, transcribed from Linux netem (net/sched/sch_netem.c) so that a given set of
//! parameters means the same here as in `tc qdisc ... netem loss ...`. Pure: no I/O, no clock.
//!
//! Probabilities are kept in netem's 32-bit fixed point and compared the way netem compares
//! them, including its choice of which draws are made in which state.

use crate::config::LossConfig;
use crate::rng::{prob_to_u32, Correlated, Rng};

/// States of the 4-state Markov model (netem `loss state`), numbered as in netem's docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FourState {
    /// 1: packets transmitted within a gap period.
    TxInGap,
    /// 2: packets transmitted within a burst period.
    TxInBurst,
    /// 3: packets lost within a burst period.
    LostInBurst,
    /// 4: isolated losses within a gap period.
    LostInGap,
}

/// A loss model with its state.
#[derive(Debug, Clone)]
pub enum Loss {
    None,
    /// Bernoulli loss with netem's (averaging) correlation.
    Random {
        p: u32,
        cor: Correlated,
    },
    /// Gilbert-Elliott: in Good, go Bad with p and lose with 1-k; in Bad, go Good with r and
    /// lose with 1-h. The packet is judged by the state it arrives in.
    Gemodel {
        p: u32,
        r: u32,
        h: u32,
        one_minus_k: u32,
        bad: bool,
    },
    /// 4-state Markov chain (Salsano et al.); a packet is lost when the transition it causes
    /// lands in state 3 or 4.
    State {
        p13: u32,
        p31: u32,
        p32: u32,
        p23: u32,
        p14: u32,
        state: FourState,
    },
}

impl Loss {
    pub fn new(cfg: &LossConfig) -> Loss {
        match *cfg {
            LossConfig::None => Loss::None,
            LossConfig::Random { p, correlation } => Loss::Random {
                p: prob_to_u32(p),
                cor: Correlated::new(correlation),
            },
            LossConfig::Gemodel {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => Loss::Gemodel {
                p: prob_to_u32(p),
                r: prob_to_u32(r),
                // tc passes 1-h on the command line but the kernel keeps h.
                h: u32::MAX - prob_to_u32(one_minus_h),
                one_minus_k: prob_to_u32(one_minus_k),
                bad: false,
            },
            LossConfig::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => Loss::State {
                p13: prob_to_u32(p13),
                p31: prob_to_u32(p31.unwrap_or(1.0 - p13)),
                p32: prob_to_u32(p32),
                p23: prob_to_u32(p23),
                p14: prob_to_u32(p14),
                state: FourState::TxInGap,
            },
        }
    }

    /// Decide whether the next packet is lost, advancing the model's state.
    #[inline]
    pub fn lose(&mut self, rng: &mut Rng) -> bool {
        match self {
            Loss::None => false,
            // netem: `q->loss && q->loss >= get_crandom(&q->loss_cor)`
            Loss::Random { p, cor } => *p != 0 && *p >= cor.next(rng),
            // netem loss_gilb_ell(): two draws per packet, transition first, then the loss
            // test of the state the packet arrived in.
            Loss::Gemodel {
                p,
                r,
                h,
                one_minus_k,
                bad,
            } => {
                if !*bad {
                    if rng.next_u32() < *p {
                        *bad = true;
                    }
                    rng.next_u32() < *one_minus_k
                } else {
                    if rng.next_u32() < *r {
                        *bad = false;
                    }
                    rng.next_u32() > *h
                }
            }
            // netem loss_4state() (with the 2026 boundary clean-up: no gaps at rnd == a4 etc.):
            // one draw per packet. Sums are done in u64 (netem adds in u32, which only differs
            // when the probabilities add up past 1, which the config rejects).
            Loss::State {
                p13,
                p31,
                p32,
                p23,
                p14,
                state,
            } => {
                let rnd = rng.next_u32() as u64;
                let (a1, a2, a3, a4, a5) = (
                    *p13 as u64,
                    *p31 as u64,
                    *p32 as u64,
                    *p14 as u64,
                    *p23 as u64,
                );
                match *state {
                    FourState::TxInGap => {
                        if rnd < a4 {
                            *state = FourState::LostInGap;
                            true
                        } else if rnd < a1 + a4 {
                            *state = FourState::LostInBurst;
                            true
                        } else {
                            false
                        }
                    }
                    FourState::TxInBurst => {
                        if rnd < a5 {
                            *state = FourState::LostInBurst;
                            true
                        } else {
                            false
                        }
                    }
                    FourState::LostInBurst => {
                        if rnd < a3 {
                            *state = FourState::TxInBurst;
                            false
                        } else if rnd < a2 + a3 {
                            *state = FourState::TxInGap;
                            false
                        } else {
                            // stays in the burst: lost again
                            true
                        }
                    }
                    FourState::LostInGap => {
                        *state = FourState::TxInGap;
                        false
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_never_loses() {
        let mut r = Rng::new(1, 0);
        let mut l = Loss::new(&LossConfig::None);
        assert!((0..10_000).all(|_| !l.lose(&mut r)));
    }

    #[test]
    fn random_extremes() {
        let mut r = Rng::new(1, 0);
        let mut l0 = Loss::new(&LossConfig::Random {
            p: 0.0,
            correlation: 0.0,
        });
        let mut l1 = Loss::new(&LossConfig::Random {
            p: 1.0,
            correlation: 0.0,
        });
        for _ in 0..10_000 {
            assert!(!l0.lose(&mut r));
            assert!(l1.lose(&mut r));
        }
    }

    #[test]
    fn gemodel_state_bad_loses_everything_with_default_h() {
        // p = 1: always goes bad after the first packet; r = 0: never comes back; 1-h = 1.
        let mut r = Rng::new(9, 0);
        let mut l = Loss::new(&LossConfig::Gemodel {
            p: 1.0,
            r: 0.0,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        });
        assert!(!l.lose(&mut r)); // judged in Good
        assert!((0..1000).all(|_| l.lose(&mut r)));
    }
}
