//! RRSUM of transfer messages: the answer records of DNS messages in RFC 4034 6.2
//! canonical form, as `harness.xfr.rrsum.sum_message` and `sum_stream` compute it.
//!
//! Types whose canonical form is known here: those without names in the rdata
//! (`RAW_TYPES`), one name (`NAME_TYPES`), MX, SOA, SRV and RRSIG, exactly as the Python
//! fast paths treat them. Any other type goes to the caller's `fallback` (the Python side
//! hands it to dnspython), so no type is canonicalised differently from the reference.

use crate::sum::{Hasher, Sum};

/// Types without domain names in the rdata (harness.xfr.digest.RAW_TYPES).
fn is_raw(rtype: u16) -> bool {
    matches!(
        rtype,
        1 | 13 | 16 | 28 | 43 | 44 | 48 | 50 | 51 | 52 | 53 | 59 | 60 | 61 | 63 | 99 | 257
    )
}

/// Types whose rdata is one name, lower-cased (NS MD MF CNAME MB MG MR PTR DNAME).
pub fn is_name_type(rtype: u16) -> bool {
    matches!(rtype, 2 | 3 | 4 | 5 | 7 | 8 | 9 | 12 | 39)
}

const TYPE_SOA: u16 = 6;
const TYPE_MX: u16 = 15;
const TYPE_SRV: u16 = 33;
const TYPE_RRSIG: u16 = 46;

/// A malformed message or stream; the text says what and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Failure of a digest: malformed wire data, or an error raised by the fallback (carried
/// through untouched, so the Python side re-raises its own exception).
#[derive(Debug)]
pub enum Error<E> {
    Wire(WireError),
    Fallback(E),
}

impl<E> From<WireError> for Error<E> {
    fn from(e: WireError) -> Self {
        Error::Wire(e)
    }
}

fn err<T, E>(text: String) -> Result<T, Error<E>> {
    Err(Error::Wire(WireError(text)))
}

const PAST_END: &str = "a record runs past the end of the message";

/// Canonical rdata of a record type not handled here: (message, type, class, rdata offset,
/// rdata length) -> canonical rdata.
pub trait Fallback {
    type Error;
    fn canonical_rdata(
        &mut self,
        msg: &[u8],
        rtype: u16,
        rclass: u16,
        off: usize,
        rdlen: usize,
    ) -> Result<Vec<u8>, Self::Error>;
    /// Called once a message is done, so that per-message state can be dropped.
    fn message_done(&mut self) {}
}

/// A fallback that refuses every type it is asked about (pure Rust callers, tests).
pub struct NoFallback;

impl Fallback for NoFallback {
    type Error = WireError;
    fn canonical_rdata(
        &mut self,
        _: &[u8],
        rtype: u16,
        _: u16,
        off: usize,
        _: usize,
    ) -> Result<Vec<u8>, WireError> {
        Err(WireError(format!(
            "type {rtype} at offset {off} needs the Python fallback"
        )))
    }
}

/// Names already decoded in the current message, by offset (canonical wire kept in one
/// arena). A generation counter clears the table in O(1) between messages.
struct NameCache {
    generation: u32,
    stamp: Vec<u32>,
    span: Vec<(u32, u16)>,
    arena: Vec<u8>,
}

impl NameCache {
    fn new() -> Self {
        NameCache {
            generation: 0,
            stamp: vec![0; 0x4000],
            span: vec![(0, 0); 0x4000],
            arena: Vec::new(),
        }
    }

    fn reset(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.arena.clear();
    }

    #[inline]
    fn get(&self, off: usize) -> Option<&[u8]> {
        if off < 0x4000 && self.stamp[off] == self.generation {
            let (start, len) = self.span[off];
            Some(&self.arena[start as usize..start as usize + len as usize])
        } else {
            None
        }
    }

    #[inline]
    fn put(&mut self, off: usize, wire: &[u8]) {
        if off < 0x4000 {
            let start = self.arena.len();
            self.arena.extend_from_slice(wire);
            self.stamp[off] = self.generation;
            self.span[off] = (start as u32, wire.len() as u16);
        }
    }
}

/// The reusable state of a digest over many messages.
pub struct Walker {
    names: NameCache,
    scratch: Vec<u8>,
    pub hasher: Hasher,
}

impl Default for Walker {
    fn default() -> Self {
        Self::new()
    }
}

impl Walker {
    pub fn new() -> Self {
        Walker {
            names: NameCache::new(),
            scratch: Vec::with_capacity(512),
            hasher: Hasher::new(),
        }
    }

    pub fn finish(self) -> Sum {
        self.hasher.finish()
    }

    /// Appends the canonical (lower-cased, uncompressed) wire of the name at `off` to
    /// `self.scratch`; returns the offset after the name. Pointers must point before the
    /// start of the part of the name that holds them (no loops).
    fn name_into_scratch<E>(&mut self, msg: &[u8], off: usize) -> Result<usize, Error<E>> {
        let first = self.scratch.len();
        let end = self.decode(msg, off, first)?;
        if self.scratch.len() - first > 255 {
            return err(format!("name at offset {off} is longer than 255 octets"));
        }
        Ok(end)
    }

    fn decode<E>(&mut self, msg: &[u8], off: usize, first: usize) -> Result<usize, Error<E>> {
        if let Some(hit) = self.names.get(off) {
            self.scratch.extend_from_slice(hit);
            return Ok(skip_name(msg, off)?);
        }
        let mut pos = off;
        let end;
        loop {
            let Some(&c) = msg.get(pos) else {
                return err(PAST_END.to_string());
            };
            if c == 0 {
                self.scratch.push(0);
                end = pos + 1;
                break;
            }
            if c >= 0xC0 {
                let Some(&low) = msg.get(pos + 1) else {
                    return err(PAST_END.to_string());
                };
                let target = (usize::from(c & 0x3F) << 8) | usize::from(low);
                if target >= off {
                    return err(format!(
                        "compression pointer at offset {pos} does not point back"
                    ));
                }
                let here = self.scratch.len();
                self.decode(msg, target, here)?;
                if self.scratch.len() - here > 255 {
                    return err(format!("name at offset {target} is longer than 255 octets"));
                }
                end = pos + 2;
                break;
            }
            if c > 63 {
                return err(format!("label length {c} at offset {pos} (bad label type)"));
            }
            let label_end = pos + 1 + usize::from(c);
            if label_end >= msg.len() {
                return err(PAST_END.to_string());
            }
            self.scratch.push(c);
            self.scratch
                .extend(msg[pos + 1..label_end].iter().map(u8::to_ascii_lowercase));
            pos = label_end;
        }
        if self.scratch.len() - first <= 255 {
            let wire = self.scratch[first..].to_vec();
            self.names.put(off, &wire);
        }
        Ok(end)
    }

    /// Sum of the answer records of one message into `self.hasher` (`drop_last`: all but
    /// the last, the closing SOA of an AXFR).
    pub fn message<F: Fallback>(
        &mut self,
        msg: &[u8],
        drop_last: bool,
        fallback: &mut F,
    ) -> Result<(), Error<F::Error>> {
        let result = self.message_inner(msg, drop_last, fallback);
        fallback.message_done();
        result
    }

    fn message_inner<F: Fallback>(
        &mut self,
        msg: &[u8],
        drop_last: bool,
        fallback: &mut F,
    ) -> Result<(), Error<F::Error>> {
        let size = msg.len();
        if size < 12 {
            return err(format!(
                "message of {size} bytes is shorter than a DNS header"
            ));
        }
        self.names.reset();
        let qdcount = usize::from(u16::from_be_bytes([msg[4], msg[5]]));
        let count = usize::from(u16::from_be_bytes([msg[6], msg[7]]));
        let mut off = 12;
        for _ in 0..qdcount {
            off = skip_name(msg, off)? + 4;
        }
        if off > size {
            return err("question section runs past the end of the message".to_string());
        }
        if drop_last && count == 0 {
            return err(
                "the message that should end with the closing SOA has no answers".to_string(),
            );
        }
        for index in 0..count {
            self.scratch.clear();
            let pos = self.name_into_scratch(msg, off)?;
            if pos + 10 > size {
                return err(PAST_END.to_string());
            }
            let rtype = u16::from_be_bytes([msg[pos], msg[pos + 1]]);
            let rdlen = usize::from(u16::from_be_bytes([msg[pos + 8], msg[pos + 9]]));
            let rd = pos + 10;
            let end = rd + rdlen;
            if end > size {
                return err(format!(
                    "the last record runs past the end of the message ({end} > {size})"
                ));
            }
            self.scratch.extend_from_slice(&msg[pos..pos + 8]);
            if is_raw(rtype) {
                self.scratch.extend_from_slice(&msg[pos + 8..end]);
            } else {
                self.scratch.extend_from_slice(&[0, 0]); // RDLENGTH, set below
                let rstart = self.scratch.len();
                if is_name_type(rtype) {
                    let after = self.name_into_scratch(msg, rd)?;
                    if after != end {
                        return err(format!(
                            "type {rtype} rdata at offset {rd} has a bad length"
                        ));
                    }
                } else if rtype == TYPE_MX || rtype == TYPE_SRV {
                    let prefix = if rtype == TYPE_MX { 2 } else { 6 };
                    if rd + prefix > size {
                        return err(PAST_END.to_string());
                    }
                    self.scratch.extend_from_slice(&msg[rd..rd + prefix]);
                    let after = self.name_into_scratch(msg, rd + prefix)?;
                    if after != end {
                        return err(format!(
                            "type {rtype} rdata at offset {rd} has a bad length"
                        ));
                    }
                } else if rtype == TYPE_SOA {
                    let after = self.name_into_scratch(msg, rd)?;
                    let after = self.name_into_scratch(msg, after)?;
                    if after + 20 != end {
                        return err(format!("SOA rdata at offset {rd} has a bad length"));
                    }
                    self.scratch.extend_from_slice(&msg[after..end]);
                } else if rtype == TYPE_RRSIG {
                    if rd + 18 > size {
                        return err(PAST_END.to_string());
                    }
                    self.scratch.extend_from_slice(&msg[rd..rd + 18]);
                    let after = self.name_into_scratch(msg, rd + 18)?;
                    if after > end {
                        return err(format!("RRSIG rdata at offset {rd} is too short"));
                    }
                    self.scratch.extend_from_slice(&msg[after..end]);
                } else {
                    let rclass = u16::from_be_bytes([msg[pos + 2], msg[pos + 3]]);
                    let rdata = fallback
                        .canonical_rdata(msg, rtype, rclass, rd, rdlen)
                        .map_err(Error::Fallback)?;
                    self.scratch.extend_from_slice(&rdata);
                }
                let len = self.scratch.len() - rstart;
                if len > 0xFFFF {
                    return err(format!("type {rtype} rdata at offset {rd} is too long"));
                }
                self.scratch[rstart - 2..rstart].copy_from_slice(&(len as u16).to_be_bytes());
            }
            if !(drop_last && index + 1 == count) {
                self.hasher.extend(&self.scratch);
                self.hasher.end_record();
            }
            off = end;
        }
        Ok(())
    }

    /// Sum over a run of whole 2-byte-length-prefixed messages (a TCP stream, or a chunk of
    /// one cut at message boundaries); `drop_last` leaves out the last answer record of the
    /// last message (the closing SOA of an AXFR).
    pub fn stream<F: Fallback>(
        &mut self,
        data: &[u8],
        drop_last: bool,
        fallback: &mut F,
    ) -> Result<(), Error<F::Error>> {
        let size = data.len();
        let mut pos = 0;
        if drop_last && size == 0 {
            return err("an empty stream has no closing SOA to leave out".to_string());
        }
        while pos < size {
            if size - pos < 2 {
                return err(format!("stray byte at offset {pos} of a stream chunk"));
            }
            let length = usize::from(u16::from_be_bytes([data[pos], data[pos + 1]]));
            if pos + 2 + length > size {
                return err(format!(
                    "message at offset {pos} of a stream chunk is incomplete"
                ));
            }
            let msg = &data[pos + 2..pos + 2 + length];
            pos += 2 + length;
            self.message(msg, drop_last && pos == size, fallback)?;
        }
        Ok(())
    }
}

/// Offset just after the (possibly compressed) name at `off`.
fn skip_name(msg: &[u8], off: usize) -> Result<usize, WireError> {
    let mut pos = off;
    while let Some(&c) = msg.get(pos) {
        if c == 0 {
            return Ok(pos + 1);
        }
        if c >= 0xC0 {
            return Ok(pos + 2);
        }
        if c > 63 {
            return Err(WireError(format!(
                "label length {c} at offset {pos} (bad label type)"
            )));
        }
        pos += 1 + usize::from(c);
    }
    Err(WireError(format!(
        "name at offset {off} runs past the end of the message"
    )))
}

/// The sum of a stream with no fallback (tests, pure Rust callers).
pub fn sum_stream(data: &[u8], drop_last: bool) -> Result<Sum, Error<WireError>> {
    let mut walker = Walker::new();
    walker.stream(data, drop_last, &mut NoFallback)?;
    Ok(walker.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(ancount: u16) -> Vec<u8> {
        let mut h = vec![0, 1, 0x84, 0, 0, 0];
        h.extend_from_slice(&ancount.to_be_bytes());
        h.extend_from_slice(&[0, 0, 0, 0]);
        h
    }

    fn frame(msg: &[u8]) -> Vec<u8> {
        let mut out = (msg.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(msg);
        out
    }

    fn canonical(owner: &[u8], rtype: u16, ttl: u32, rdata: &[u8]) -> Vec<u8> {
        let mut out = owner.to_vec();
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(rdata);
        out
    }

    #[test]
    fn compressed_mixed_case_equals_canonical() {
        // Owner "Ex.Test." then NS rdata "NS1" + pointer to the owner.
        let mut msg = header(2);
        msg.extend_from_slice(b"\x02Ex\x04Test\x00");
        msg.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        msg.extend_from_slice(&[0xC0, 12]);
        msg.extend_from_slice(&[0, 2, 0, 1, 0, 0, 0, 60, 0, 6]);
        msg.extend_from_slice(&[3, b'N', b'S', b'1', 0xC0, 12]);
        let got = sum_stream(&frame(&msg), false).unwrap();
        let mut want = Sum::default();
        let owner = b"\x02ex\x04test\x00";
        want.add_digest(
            blake2s_simd::blake2s(&canonical(owner, 1, 60, &[192, 0, 2, 1])).as_bytes(),
        );
        let ns = b"\x03ns1\x02ex\x04test\x00";
        want.add_digest(blake2s_simd::blake2s(&canonical(owner, 2, 60, ns)).as_bytes());
        assert_eq!(got, want);
        // drop_last leaves the NS out.
        let mut first = Sum::default();
        first.add_digest(
            blake2s_simd::blake2s(&canonical(owner, 1, 60, &[192, 0, 2, 1])).as_bytes(),
        );
        assert_eq!(sum_stream(&frame(&msg), true).unwrap(), first);
    }

    #[test]
    fn malformed_messages_are_errors() {
        let mut fwd = header(1);
        fwd.extend_from_slice(&[0xC0, 0x20, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]);
        let text = |r: Result<Sum, Error<WireError>>| match r {
            Err(Error::Wire(WireError(t))) => t,
            other => panic!("expected an error, got {other:?}"),
        };
        assert!(text(sum_stream(&frame(&fwd), false)).contains("does not point back"));
        let mut bad = header(1);
        bad.extend_from_slice(&[0x41, b'a', 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]);
        assert!(text(sum_stream(&frame(&bad), false)).contains("bad label type"));
        let short = header(3);
        assert!(text(sum_stream(&frame(&short), false)).contains("past the end"));
        assert!(text(sum_stream(&[0, 5, 1], false)).contains("incomplete"));
        assert!(text(sum_stream(&frame(&[0; 4]), false)).contains("shorter than a DNS header"));
        assert!(text(sum_stream(&[], true)).contains("empty stream"));
    }
}
