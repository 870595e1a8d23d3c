//! Statistical tests of the pure models against analytic values (no root, no network).

use linkem::config::{Config, DirectionConfig, JitterDistribution, LossConfig};
use linkem::delay::DelayModel;
use linkem::impair::{Decision, Impairment};
use linkem::loss::Loss;
use linkem::rng::Rng;
use linkem::sched::Scheduler;

fn run_loss(cfg: &LossConfig, n: usize, seed: u64) -> Vec<bool> {
    let mut rng = Rng::new(seed, 0);
    let mut l = Loss::new(cfg);
    (0..n).map(|_| l.lose(&mut rng)).collect()
}

fn rate(v: &[bool]) -> f64 {
    v.iter().filter(|&&x| x).count() as f64 / v.len() as f64
}

/// Mean length of runs of consecutive losses.
fn mean_burst(v: &[bool]) -> f64 {
    let (mut bursts, mut lost, mut prev) = (0usize, 0usize, false);
    for &x in v {
        if x {
            lost += 1;
            if !prev {
                bursts += 1;
            }
        }
        prev = x;
    }
    lost as f64 / bursts as f64
}

/// P(loss | previous packet lost).
fn p_loss_after_loss(v: &[bool]) -> f64 {
    let pairs: Vec<_> = v.windows(2).filter(|w| w[0]).collect();
    pairs.iter().filter(|w| w[1]).count() as f64 / pairs.len() as f64
}

fn dir(extra: &str) -> DirectionConfig {
    let text = format!(r#"{{"directions":[{{"name":"f","queue":1{extra}}}]}}"#);
    Config::from_json(&text).unwrap().directions.remove(0)
}

#[test]
fn random_loss_long_run_rate() {
    for p in [0.01, 0.1, 0.5] {
        let v = run_loss(
            &LossConfig::Random {
                p,
                correlation: 0.0,
            },
            1_000_000,
            1,
        );
        let r = rate(&v);
        // 5 standard deviations of a binomial proportion
        let tol = 5.0 * (p * (1.0 - p) / 1e6f64).sqrt();
        assert!((r - p).abs() < tol, "p={p} measured {r}");
    }
}

#[test]
fn random_loss_correlation_makes_losses_cluster() {
    // netem's correlation averages successive random values: losses cluster (P(loss | loss)
    // exceeds the loss rate), and, as in netem, the long-run rate falls below p.
    let p = 0.1;
    let v0 = run_loss(
        &LossConfig::Random {
            p,
            correlation: 0.0,
        },
        1_000_000,
        2,
    );
    let v3 = run_loss(
        &LossConfig::Random {
            p,
            correlation: 0.3,
        },
        1_000_000,
        2,
    );
    let c0 = p_loss_after_loss(&v0);
    let c3 = p_loss_after_loss(&v3);
    assert!((c0 - p).abs() < 0.005, "uncorrelated conditional {c0}");
    assert!(
        c3 > 2.0 * rate(&v3),
        "correlated conditional {c3} vs rate {}",
        rate(&v3)
    );
    assert!(
        rate(&v3) < p,
        "netem's correlated loss lowers the long-run rate"
    );
    assert!(mean_burst(&v3) > mean_burst(&v0));
}

#[test]
fn gemodel_stationary_loss_rate() {
    let (p, r, omh, omk) = (0.05, 0.3, 0.8, 0.02);
    let v = run_loss(
        &LossConfig::Gemodel {
            p,
            r,
            one_minus_h: omh,
            one_minus_k: omk,
        },
        2_000_000,
        3,
    );
    let pi_bad = p / (p + r);
    let expect = (1.0 - pi_bad) * omk + pi_bad * omh;
    let got = rate(&v);
    assert!(
        (got - expect).abs() < 0.002,
        "expected {expect}, measured {got}"
    );
}

#[test]
fn gemodel_simple_gilbert_burst_length_is_one_over_r() {
    // Simple Gilbert: every packet in Bad is lost, none in Good.
    for r in [0.25, 0.5, 0.8] {
        let p = 0.02;
        let v = run_loss(
            &LossConfig::Gemodel {
                p,
                r,
                one_minus_h: 1.0,
                one_minus_k: 0.0,
            },
            2_000_000,
            4,
        );
        let b = mean_burst(&v);
        assert!(
            (b - 1.0 / r).abs() < 0.03 / r,
            "r={r}: mean burst {b}, expected {}",
            1.0 / r
        );
        let expect = p / (p + r);
        assert!(
            (rate(&v) - expect).abs() < 0.002,
            "r={r}: rate {} vs {expect}",
            rate(&v)
        );
    }
}

/// Stationary distribution of the 4-state chain by power iteration; loss = pi3 + pi4
/// (a packet is lost when its transition lands in state 3 or 4).
fn four_state_analytic(p13: f64, p31: f64, p32: f64, p23: f64, p14: f64) -> f64 {
    // rows: from state 1..4, columns: to state 1..4
    let m = [
        [1.0 - p13 - p14, 0.0, p13, p14],
        [0.0, 1.0 - p23, p23, 0.0],
        [p31, p32, 1.0 - p31 - p32, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ];
    let mut pi = [0.25; 4];
    for _ in 0..200_000 {
        let mut next = [0.0; 4];
        for (i, row) in m.iter().enumerate() {
            for (j, &pij) in row.iter().enumerate() {
                next[j] += pi[i] * pij;
            }
        }
        pi = next;
    }
    pi[2] + pi[3]
}

#[test]
fn four_state_stationary_loss_rate() {
    for (p13, p31, p32, p23, p14) in [
        (0.02, 0.3, 0.2, 0.1, 0.01),
        (0.05, 0.5, 0.0, 1.0, 0.0),
        (0.01, 0.1, 0.4, 0.3, 0.05),
    ] {
        let cfg = LossConfig::State {
            p13,
            p31: Some(p31),
            p32,
            p23,
            p14,
        };
        let v = run_loss(&cfg, 2_000_000, 5);
        let expect = four_state_analytic(p13, p31, p32, p23, p14);
        let got = rate(&v);
        assert!(
            (got - expect).abs() < 0.003 + 0.02 * expect,
            "{p13} {p31} {p32} {p23} {p14}: expected {expect}, measured {got}"
        );
    }
}

#[test]
fn four_state_tc_defaults_give_bernoulli_like_loss() {
    // `loss state P` alone: p31 = 1-P, so bursts are Bernoulli-ish with rate ~ P.
    let cfg = dir(r#","loss":{"model":"state","p13":0.1}"#).loss;
    let v = run_loss(&cfg, 1_000_000, 6);
    let expect = four_state_analytic(0.1, 0.9, 0.0, 1.0, 0.0);
    assert!(
        (rate(&v) - expect).abs() < 0.003,
        "{} vs {expect}",
        rate(&v)
    );
}

/// Feed packets arriving every `gap_ns` through an impairment and a scheduler; return the
/// arrival indices in release order and the release times.
fn simulate(imp: &mut Impairment, n: usize, gap_ns: u64) -> (Vec<usize>, Vec<u64>) {
    let mut s = Scheduler::new();
    for i in 0..n {
        if let Decision::Pass { delay_ns, .. } = imp.decide() {
            s.push(i as u64 * gap_ns + delay_ns, i);
        }
    }
    let mut order = Vec::new();
    let mut times = Vec::new();
    while let Some((t, i)) = s.pop_due(u64::MAX) {
        order.push(i);
        times.push(t);
    }
    (order, times)
}

#[test]
fn no_jitter_releases_fifo() {
    let mut imp = Impairment::new(&dir(r#","delay_us":150000"#), 1);
    let (order, times) = simulate(&mut imp, 10_000, 100_000);
    assert_eq!(order, (0..10_000).collect::<Vec<_>>());
    assert_eq!(times[0], 150_000_000);
}

#[test]
fn jitter_releases_in_time_order_and_reorders() {
    let mut imp = Impairment::new(
        &dir(r#","delay_us":20000,"jitter_us":5000,"jitter_distribution":"normal""#),
        1,
    );
    let (order, times) = simulate(&mut imp, 10_000, 100_000);
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "release times must not go back"
    );
    assert_eq!(order.len(), 10_000);
    let inversions = order.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(
        inversions > 100,
        "jitter larger than the packet gap must reorder ({inversions})"
    );
}

fn delay_samples(dist: JitterDistribution, cor: f64, n: usize) -> Vec<f64> {
    let mut m = DelayModel::new(100_000, 10_000, dist, cor);
    let mut r = Rng::new(11, 0);
    (0..n)
        .map(|_| m.sample_ns(&mut r) as f64 / 1000.0)
        .collect() // µs
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, var.sqrt())
}

#[test]
fn jitter_distribution_mean_and_stddev() {
    let n = 400_000;
    let (mu, sigma) = (100_000.0, 10_000.0);
    // uniform on [mu - sigma, mu + sigma)
    let (m, sd) = mean_sd(&delay_samples(JitterDistribution::Uniform, 0.0, n));
    assert!((m - mu).abs() < 60.0, "uniform mean {m}");
    assert!((sd - sigma / 3f64.sqrt()).abs() < 60.0, "uniform sd {sd}");
    // normal (clamped at 4 sigma like netem's table: negligible)
    let (m, sd) = mean_sd(&delay_samples(JitterDistribution::Normal, 0.0, n));
    assert!((m - mu).abs() < 80.0, "normal mean {m}");
    assert!((sd - sigma).abs() < 80.0, "normal sd {sd}");
    // pareto (a = 3) as iproute2 builds it: (min(X, c) - 1.5) * 4/3 with X ~ Pareto(1, 3)
    // and c where the 16-bit table saturates. E[min(X,c)] = 1.5 - 0.5/c^2,
    // E[min(X,c)^2] = 3 - 2/c.
    let c = 1.5 + 0.75 * (i16::MAX as f64 / 8192.0);
    let ey = 1.5 - 0.5 / (c * c);
    let vy = 3.0 - 2.0 / c - ey * ey;
    let exp_mean = mu + sigma * (ey - 1.5) * 4.0 / 3.0;
    let exp_sd = sigma * vy.sqrt() * 4.0 / 3.0;
    let (m, sd) = mean_sd(&delay_samples(JitterDistribution::Pareto, 0.0, n));
    assert!(
        (m - exp_mean).abs() < 100.0,
        "pareto mean {m} vs {exp_mean}"
    );
    assert!((sd - exp_sd).abs() < 200.0, "pareto sd {sd} vs {exp_sd}");
    // paretonormal: a mix, centred near mu with spread between the two
    let (m, sd) = mean_sd(&delay_samples(JitterDistribution::Paretonormal, 0.0, n));
    assert!((m - mu).abs() < 500.0, "paretonormal mean {m}");
    assert!(sd > 0.5 * sigma && sd < 1.5 * sigma, "paretonormal sd {sd}");
}

#[test]
fn delay_correlation_raises_autocorrelation() {
    fn lag1(v: &[f64]) -> f64 {
        let (m, sd) = mean_sd(v);
        let c: f64 = v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>();
        c / (v.len() - 1) as f64 / (sd * sd)
    }
    let a0 = lag1(&delay_samples(JitterDistribution::Uniform, 0.0, 200_000));
    let a5 = lag1(&delay_samples(JitterDistribution::Uniform, 0.5, 200_000));
    assert!(a0.abs() < 0.01, "uncorrelated lag-1 {a0}");
    assert!(a5 > 0.4, "correlated lag-1 {a5}");
}

fn decisions(seed: u64) -> Vec<Decision> {
    let d = dir(
        r#","delay_us":50000,"jitter_us":10000,"jitter_distribution":"paretonormal",
           "delay_correlation":0.3,"loss":{"model":"gemodel","p":0.05,"r":0.4},
           "duplicate":0.05,"reorder":0.1,"reorder_gap":3"#,
    );
    let mut imp = Impairment::new(&d, seed);
    (0..50_000).map(|_| imp.decide()).collect()
}

#[test]
fn same_seed_same_decisions_different_seed_differs() {
    let a = decisions(42);
    assert_eq!(a, decisions(42));
    assert_ne!(a, decisions(43));
}

fn config_directions(directions: &str) -> Vec<DirectionConfig> {
    Config::from_json(&format!(r#"{{"seed":42,"directions":[{directions}]}}"#))
        .unwrap()
        .directions
}

fn fates(d: &DirectionConfig, seed: u64) -> Vec<Decision> {
    let mut imp = Impairment::new(d, seed);
    (0..256).map(|_| imp.decide()).collect()
}

#[test]
fn directions_have_their_own_streams_keyed_by_name() {
    let loss = r#""loss":{"model":"random","p":0.5}"#;
    let both = config_directions(&format!(
        r#"{{"name":"forward","queue":10,{loss}}},{{"name":"reverse","queue":11,{loss}}}"#
    ));
    let reverse_only = config_directions(&format!(r#"{{"name":"reverse","queue":11,{loss}}}"#));
    // Same seed, same model: the two directions still drop different packets.
    assert_ne!(fates(&both[0], 42), fates(&both[1], 42));
    // A direction's fates do not depend on whether the other direction is configured (the
    // stream used to be the position in the list, so "reverse" alone took forward's stream).
    assert_eq!(fates(&both[1], 42), fates(&reverse_only[0], 42));
    assert_ne!(fates(&reverse_only[0], 42), fates(&both[0], 42));
}
