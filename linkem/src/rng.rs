//! Deterministic pseudo-random numbers.
//!
//! linkem uses xoshiro256** (Blackman & Vigna, 2018), seeded through splitmix64, written out
//! here so that the stream can never change under us with a dependency upgrade: a run with the
//! same seed and the same packet arrival sequence makes the same decisions on any build.
//! Each direction gets its own stream (`seed`, `stream` = [`stream_of`] its name), so the two
//! directions, which run on separate threads, never interfere with each other's draws, and a
//! direction's stream does not depend on which other directions the config lists.

/// splitmix64 step: used only to expand a 64-bit seed into xoshiro's 256-bit state.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256** generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `seed` and an independent `stream` (see [`stream_of`]).
    pub fn new(seed: u64, stream: u64) -> Self {
        // Hash the seed, then the stream on top of it, before expansion: a plain
        // `seed ^ f(stream)` makes (s, 1) and (s ^ f(1), 0) the same generator, so two
        // directions of different seeds could share a stream. splitmix64's finaliser is a
        // bijection, so for one stream distinct seeds still give distinct states.
        let mut x = seed;
        let hashed = splitmix64(&mut x);
        let mut x = hashed ^ stream;
        x = splitmix64(&mut x);
        let mut s = [0u64; 4];
        for w in &mut s {
            *w = splitmix64(&mut x);
        }
        // An all-zero state is the one fixed point of xoshiro; splitmix64 cannot produce four
        // zeros in a row, but keep the guard for clarity.
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Next 32 random bits (the high half, which is the better half for xoshiro).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The stream number of a named direction: FNV-1a (64-bit) of its name. Keyed by name, not by
/// position in the config, so "reverse" draws the same packets' fates whether or not
/// "forward" is emulated too.
pub fn stream_of(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// A probability in 0..=1 as netem's 32-bit fixed point (tc: `rint(p * UINT32_MAX)`).
pub fn prob_to_u32(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * u32::MAX as f64).round() as u32
}

/// netem's correlated random source (`struct crndstate` / `get_crandom()`): each value is a
/// weighted average of a fresh random value and the previous value, weight `rho` on the
/// previous one. rho = 0 gives plain independent values.
///
/// Like netem, this keeps the mean at 1/2 but narrows the spread as rho grows, so a
/// correlated "random" loss of p does not lose exactly p in the long run; that is netem's
/// documented behaviour and we keep it so that figures compare with netem's.
#[derive(Clone, Debug)]
pub struct Correlated {
    rho: u32,
    last: u32,
}

impl Correlated {
    /// `rho` is the correlation as a fraction 0..=1.
    pub fn new(rho: f64) -> Self {
        Correlated {
            rho: prob_to_u32(rho),
            last: 0,
        }
    }

    /// Next correlated 32-bit value.
    #[inline]
    pub fn next(&mut self, rng: &mut Rng) -> u32 {
        if self.rho == 0 {
            return rng.next_u32();
        }
        let value = rng.next_u32() as u64;
        let rho = self.rho as u64 + 1;
        let answer = ((value * ((1u64 << 32) - rho) + self.last as u64 * rho) >> 32) as u32;
        self.last = answer;
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(42, 0);
        let mut b = Rng::new(42, 0);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn different_seed_or_stream_differs() {
        let mut a = Rng::new(42, 0);
        let mut b = Rng::new(43, 0);
        let mut c = Rng::new(42, 1);
        let va: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_ne!(va, vb);
        assert_ne!(va, vc);
    }

    fn first(seed: u64, stream: u64) -> Vec<u64> {
        let mut r = Rng::new(seed, stream);
        (0..16).map(|_| r.next_u64()).collect()
    }

    #[test]
    fn streams_are_not_a_shifted_seed() {
        // The old mixing (seed ^ stream * K) made these two the same generator.
        let k = 0xD1B5_4A32_D192_ED03u64;
        assert_ne!(first(42, 0), first(42 ^ k, 1));
        assert_ne!(first(42, 1), first(42 ^ k, 0));
        // Neighbouring seeds and streams give unrelated first words (no shared prefix).
        let words: Vec<u64> = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
            .iter()
            .map(|&(s, t)| first(s, t)[0])
            .collect();
        for (i, a) in words.iter().enumerate() {
            for b in &words[i + 1..] {
                assert!((a ^ b).count_ones() > 8, "{a:x} {b:x}");
            }
        }
    }

    #[test]
    fn stream_of_names() {
        assert_eq!(stream_of(""), 0xCBF2_9CE4_8422_2325); // FNV-1a offset basis
        assert_eq!(stream_of("a"), 0xAF63_DC4C_8601_EC8C); // FNV-1a test vector
        assert_ne!(stream_of("forward"), stream_of("reverse"));
        assert_eq!(stream_of("forward"), stream_of("forward"));
    }

    #[test]
    fn f64_in_unit_interval_and_mean_half() {
        let mut r = Rng::new(7, 0);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        assert!((sum / n as f64 - 0.5).abs() < 0.005);
    }

    #[test]
    fn prob_fixed_point_ends() {
        assert_eq!(prob_to_u32(0.0), 0);
        assert_eq!(prob_to_u32(1.0), u32::MAX);
        assert_eq!(prob_to_u32(2.0), u32::MAX);
    }

    #[test]
    fn correlation_zero_is_plain_stream() {
        let mut r1 = Rng::new(1, 0);
        let mut r2 = Rng::new(1, 0);
        let mut c = Correlated::new(0.0);
        for _ in 0..100 {
            assert_eq!(c.next(&mut r1), r2.next_u32());
        }
    }

    #[test]
    fn correlation_makes_successive_values_close() {
        // Mean absolute step between successive values shrinks with rho.
        fn mean_step(rho: f64) -> f64 {
            let mut r = Rng::new(3, 0);
            let mut c = Correlated::new(rho);
            let mut prev = c.next(&mut r) as f64;
            let mut sum = 0.0;
            let n = 100_000;
            for _ in 0..n {
                let v = c.next(&mut r) as f64;
                sum += (v - prev).abs();
                prev = v;
            }
            sum / n as f64 / u32::MAX as f64
        }
        let s0 = mean_step(0.0);
        let s5 = mean_step(0.5);
        let s9 = mean_step(0.9);
        assert!((s0 - 1.0 / 3.0).abs() < 0.01, "uncorrelated step {s0}");
        assert!(s5 < s0 && s9 < s5, "{s0} {s5} {s9}");
    }
}
