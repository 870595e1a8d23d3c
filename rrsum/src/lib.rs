//! RRSUM, the order-independent zone digest of xfrbench, in compiled form: the same sums as
//! the Python reference (harness/xfr/rrsum.py, rrsum_text.py), byte for byte.
//!
//! - `wire`: the answer records of transfer messages (what verify_copy reads);
//! - `text`: zone-file lines (the primary's reference, zonefile_sum);
//! - `sum`: BLAKE2s-256 of each canonical record, added modulo 2**256.
//!
//! With the `python` feature it is the Python extension module `xfrbench_rrsum`.

pub mod sum;
pub mod text;
pub mod wire;

#[cfg(feature = "python")]
mod py;
