//! The RRSUM accumulator: BLAKE2s-256 of each canonical record, read as a big-endian
//! integer, summed modulo 2**256, with the number of records.

/// Canonical records wait here until a batch is full, then are hashed together: hashing
/// several short inputs at once lets blake2s_simd use the CPU's vector units (AVX2: 8 at a
/// time), several times faster than one hash after another.
const BATCH: usize = 64;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sum {
    /// Little-endian 64-bit limbs of the total modulo 2**256.
    limbs: [u64; 4],
    pub records: u64,
}

impl Sum {
    pub fn add_digest(&mut self, digest: &[u8]) {
        let mut carry = 0u64;
        for (i, limb) in self.limbs.iter_mut().enumerate() {
            let start = 24 - 8 * i; // limb 0 is the last 8 bytes of the big-endian digest
            let word = u64::from_be_bytes(digest[start..start + 8].try_into().unwrap());
            let (s1, c1) = limb.overflowing_add(word);
            let (s2, c2) = s1.overflowing_add(carry);
            *limb = s2;
            carry = u64::from(c1) + u64::from(c2);
        }
        self.records += 1;
    }

    pub fn add(&mut self, other: &Sum) {
        let mut carry = 0u64;
        for (limb, word) in self.limbs.iter_mut().zip(other.limbs) {
            let (s1, c1) = limb.overflowing_add(word);
            let (s2, c2) = s1.overflowing_add(carry);
            *limb = s2;
            carry = u64::from(c1) + u64::from(c2);
        }
        self.records += other.records;
    }

    /// The total as 32 big-endian bytes.
    pub fn total_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, limb) in self.limbs.iter().enumerate() {
            let start = 24 - 8 * i;
            out[start..start + 8].copy_from_slice(&limb.to_be_bytes());
        }
        out
    }

    pub fn hex(&self) -> String {
        self.total_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Collects canonical records (one contiguous buffer, ends kept) and hashes them in batches.
#[derive(Default)]
pub struct Hasher {
    buf: Vec<u8>,
    ends: Vec<usize>,
    pub sum: Sum,
}

impl Hasher {
    pub fn new() -> Self {
        Hasher {
            buf: Vec::with_capacity(BATCH * 96),
            ends: Vec::with_capacity(BATCH),
            sum: Sum::default(),
        }
    }

    /// Start a record; its bytes are appended with `push`/`extend`, then `end_record`.
    #[inline]
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    pub fn end_record(&mut self) {
        self.ends.push(self.buf.len());
        if self.ends.len() == BATCH {
            self.flush();
        }
    }

    /// Where the next record starts in the pending buffer (to drop it again, `truncate`).
    pub fn mark(&self) -> usize {
        self.buf.len()
    }

    pub fn truncate(&mut self, mark: usize) {
        self.buf.truncate(mark);
    }

    pub fn flush(&mut self) {
        if self.ends.is_empty() {
            return;
        }
        let params = blake2s_simd::Params::new();
        let mut jobs: Vec<blake2s_simd::many::HashManyJob> = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            jobs.push(blake2s_simd::many::HashManyJob::new(
                &params,
                &self.buf[start..end],
            ));
            start = end;
        }
        blake2s_simd::many::hash_many(jobs.iter_mut());
        for job in &jobs {
            self.sum.add_digest(job.to_hash().as_bytes());
        }
        drop(jobs);
        self.buf.clear();
        self.ends.clear();
    }

    pub fn finish(mut self) -> Sum {
        self.flush();
        self.sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_modulo_2_256() {
        let mut sum = Sum::default();
        sum.add_digest(&[0xff; 32]);
        let mut one = [0u8; 32];
        one[31] = 1;
        sum.add_digest(&one);
        assert_eq!(sum.total_bytes(), [0u8; 32]);
        assert_eq!(sum.records, 2);
    }

    #[test]
    fn batched_hashes_equal_single_hashes() {
        let mut hasher = Hasher::new();
        let mut expected = Sum::default();
        for i in 0..200u32 {
            let input: Vec<u8> = (0..(i % 97)).map(|j| (i * 7 + j) as u8).collect();
            hasher.extend(&input);
            hasher.end_record();
            expected.add_digest(blake2s_simd::blake2s(&input).as_bytes());
        }
        assert_eq!(hasher.finish(), expected);
    }
}
