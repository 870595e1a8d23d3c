//! Delay and jitter, as netem's `tabledist()`. Pure: no I/O, no clock.
//!
//! netem draws a (possibly correlated) 32-bit random value and looks it up in a table of
//! 4096 quantiles of a zero-mean distribution (scaled by 8192), then returns
//! `mu + sigma * table[u]`. We compute the same quantile functions analytically instead of
//! shipping the tables:
//! - uniform: netem's default (no table), `mu - sigma + (rnd mod 2 sigma)`, i.e. U[mu-sigma, mu+sigma)
//! - normal: the standard normal quantile (iproute2 normal.c)
//! - pareto: shape a = 3, shifted and scaled as iproute2 pareto.c: `(x^(-1/3) - 1.5) * 4/3`
//! - paretonormal: iproute2 paretonormal.c, `(normal(u) + 3 * pareto(u)) / 4`
//!
//! Table values are 16-bit, so every table distribution is clamped to [-4, 4) sigma; a delay
//! that comes out negative is sent at once (netem would also send it at once).

use crate::config::JitterDistribution;
use crate::rng::{Correlated, Rng};

/// Limits of netem's 16-bit tables divided by NETEM_DIST_SCALE (8192).
const TABLE_MIN: f64 = i16::MIN as f64 / 8192.0;
const TABLE_MAX: f64 = i16::MAX as f64 / 8192.0;

/// Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
// The coefficients are quoted as published.
#[allow(clippy::excessive_precision)]
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.383577518672690e+02,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    const P_LOW: f64 = 0.02425;
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    if p < P_LOW {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// iproute2's pareto table entry for quantile u (increasing in u), before clamping.
fn pareto_raw(u: f64) -> f64 {
    const A: f64 = 3.0;
    ((1.0 - u).max(1e-300).powf(-1.0 / A) - 1.5) * (4.0 / 3.0)
}

/// The zero-centred table value (in units of sigma) for quantile `u` in (0, 1).
pub fn quantile(dist: JitterDistribution, u: f64) -> f64 {
    match dist {
        JitterDistribution::Uniform => 2.0 * u - 1.0,
        JitterDistribution::Normal => normal_quantile(u).clamp(TABLE_MIN, TABLE_MAX),
        JitterDistribution::Pareto => pareto_raw(u).clamp(TABLE_MIN, TABLE_MAX),
        JitterDistribution::Paretonormal => {
            // paretonormal.c clamps the pareto part first, then the mix.
            let par = pareto_raw(u).min(TABLE_MAX);
            ((normal_quantile(u).clamp(TABLE_MIN, TABLE_MAX) + 3.0 * par) / 4.0)
                .clamp(TABLE_MIN, TABLE_MAX)
        }
    }
}

/// Delay generator for one direction: `delay_us`, `jitter_us`, distribution, correlation.
#[derive(Debug, Clone)]
pub struct DelayModel {
    mu_ns: f64,
    sigma_ns: f64,
    dist: JitterDistribution,
    cor: Correlated,
}

impl DelayModel {
    pub fn new(delay_us: u64, jitter_us: u64, dist: JitterDistribution, correlation: f64) -> Self {
        DelayModel {
            mu_ns: delay_us as f64 * 1000.0,
            sigma_ns: jitter_us as f64 * 1000.0,
            dist,
            cor: Correlated::new(correlation),
        }
    }

    /// Whether every packet gets the same delay (release order then equals arrival order).
    pub fn is_constant(&self) -> bool {
        self.sigma_ns == 0.0
    }

    /// Draw the next packet's delay in nanoseconds (never negative).
    #[inline]
    pub fn sample_ns(&mut self, rng: &mut Rng) -> u64 {
        // netem: no draw at all without jitter.
        if self.sigma_ns == 0.0 {
            return self.mu_ns as u64;
        }
        let rnd = self.cor.next(rng);
        // Midpoint of the 2^-32 cell, so u is never exactly 0 or 1.
        let u = (rnd as f64 + 0.5) / 4_294_967_296.0;
        let d = self.mu_ns + self.sigma_ns * quantile(self.dist, u);
        if d <= 0.0 {
            0
        } else {
            d.round() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_quantile_known_points() {
        assert!(normal_quantile(0.5).abs() < 1e-9);
        assert!((normal_quantile(0.975) - 1.959963985).abs() < 1e-6);
        assert!((normal_quantile(0.025) + 1.959963985).abs() < 1e-6);
        assert!((normal_quantile(0.001) + 3.090232306).abs() < 1e-6);
    }

    #[test]
    fn quantiles_are_monotone() {
        for dist in [
            JitterDistribution::Uniform,
            JitterDistribution::Normal,
            JitterDistribution::Pareto,
            JitterDistribution::Paretonormal,
        ] {
            let mut prev = f64::NEG_INFINITY;
            for i in 1..10_000 {
                let q = quantile(dist, i as f64 / 10_000.0);
                assert!(q >= prev, "{dist:?} not monotone at {i}");
                prev = q;
            }
        }
    }

    #[test]
    fn no_jitter_is_constant_and_draws_nothing() {
        let mut m = DelayModel::new(150_000, 0, JitterDistribution::Normal, 0.5);
        let mut r = Rng::new(1, 0);
        let mut r2 = Rng::new(1, 0);
        for _ in 0..100 {
            assert_eq!(m.sample_ns(&mut r), 150_000_000);
        }
        assert_eq!(r.next_u64(), r2.next_u64());
    }

    #[test]
    fn negative_delay_clamped_to_zero() {
        let mut m = DelayModel::new(1, 1000, JitterDistribution::Uniform, 0.0);
        let mut r = Rng::new(5, 0);
        let v: Vec<u64> = (0..10_000).map(|_| m.sample_ns(&mut r)).collect();
        assert!(v.contains(&0));
        assert!(v.iter().all(|&d| d <= 1_001_000));
    }
}
