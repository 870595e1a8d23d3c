//! RRSUM of zone-file lines `owner ttl class type rdata`, as
//! `harness.xfr.rrsum_text.LineSummer` computes it.
//!
//! Only what the Python fast paths convert is converted here (A, AAAA, the one-name types,
//! MX, SOA, DS, TXT of plain quoted strings; names without escapes; TTLs of plain digits;
//! classes IN/CH/HS), byte for byte the same way. Every other line (another type, an escape,
//! a comment after the rdata, a directive, anything unexpected) is *deferred*: returned
//! untouched, for the Python summer to add (sums add up, so the total is the same), or to
//! reject with its own error message.

use std::collections::HashMap;

use crate::sum::{Hasher, Sum};
use crate::wire::is_name_type;

/// What a chunk of lines gave: the sum of the lines converted here and the byte ranges of
/// the lines left to the Python summer.
pub struct TextSum {
    pub sum: Sum,
    pub deferred: Vec<(usize, usize)>,
}

pub struct LineSummer {
    origin_wire: Vec<u8>,
    origin_text: Vec<u8>, // lower-case, with the final dot ("." for the root)
    rdata_cache: HashMap<u16, HashMap<Vec<u8>, Vec<u8>>>, // per type: text -> rdata
    name: Vec<u8>,
}

const RDATA_CACHE_MAX: usize = 1 << 17;

fn is_space(c: u8) -> bool {
    // Python's bytes.split()/strip() whitespace.
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Splits like Python's `line.rstrip().split(None, 4)`.
fn fields(line: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(5);
    let mut pos = 0;
    let mut end = line.len();
    while end > 0 && is_space(line[end - 1]) {
        end -= 1;
    }
    let line = &line[..end];
    while pos < line.len() {
        while pos < line.len() && is_space(line[pos]) {
            pos += 1;
        }
        if pos >= line.len() {
            break;
        }
        if out.len() == 4 {
            out.push(&line[pos..]);
            break;
        }
        let start = pos;
        while pos < line.len() && !is_space(line[pos]) {
            pos += 1;
        }
        out.push(&line[start..pos]);
    }
    out
}

fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 10 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0u64, |v, &c| v * 10 + u64::from(c - b'0')))
}

fn rtype_of(text: &[u8]) -> Option<u16> {
    Some(match text {
        b"A" => 1,
        b"NS" => 2,
        b"MD" => 3,
        b"MF" => 4,
        b"CNAME" => 5,
        b"SOA" => 6,
        b"MB" => 7,
        b"MG" => 8,
        b"MR" => 9,
        b"PTR" => 12,
        b"MX" => 15,
        b"TXT" => 16,
        b"AAAA" => 28,
        b"DNAME" => 39,
        b"DS" => 43,
        _ => return None,
    })
}

fn ipv4(text: &[u8]) -> Option<[u8; 4]> {
    // Stricter than inet_pton (plain decimal, no leading zeros): whatever it accepts,
    // inet_pton reads the same way.
    let mut out = [0u8; 4];
    let mut parts = text.split(|&c| c == b'.');
    for byte in out.iter_mut() {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return None;
        }
        let value = digits(part)?;
        *byte = u8::try_from(value).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(out)
}

fn ipv6(text: &[u8]) -> Option<[u8; 16]> {
    // Hex groups and colons only (no embedded IPv4, no zone): std and inet_pton agree.
    if !text.iter().all(|c| c.is_ascii_hexdigit() || *c == b':') {
        return None;
    }
    let parsed: std::net::Ipv6Addr = std::str::from_utf8(text).ok()?.parse().ok()?;
    Some(parsed.octets())
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// TXT rdata of quoted strings without escapes (`_txt_wire`); None for anything else.
fn txt_wire(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut pos = 0;
    while pos < text.len() {
        let mut p = pos;
        while p < text.len() && is_space(text[p]) {
            p += 1;
        }
        if p < text.len() && text[p] == b'"' {
            let start = p + 1;
            let mut q = start;
            while q < text.len() && text[q] != b'"' && text[q] != b'\\' {
                q += 1;
            }
            if q < text.len() && text[q] == b'"' {
                let string = &text[start..q];
                if string.len() > 255 {
                    return None;
                }
                out.push(string.len() as u8);
                out.extend_from_slice(string);
                pos = q + 1;
                continue;
            }
        }
        // No quoted string here: only trailing whitespace may remain.
        if text[pos..].iter().all(|&c| is_space(c)) {
            break;
        }
        return None;
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

impl LineSummer {
    /// `origin`: the zone's name in presentation form with its final dot.
    pub fn new(origin_wire: &[u8], origin_text: &[u8]) -> Self {
        LineSummer {
            origin_wire: origin_wire.to_vec(),
            origin_text: origin_text.to_ascii_lowercase(),
            rdata_cache: HashMap::new(),
            name: Vec::with_capacity(256),
        }
    }

    /// Canonical wire of a name in presentation form into `out`; None where the Python
    /// summer would go to dnspython or raise.
    fn name_into(&mut self, text: &[u8], out: &mut Vec<u8>) -> Option<()> {
        if text.contains(&b'\\') {
            return None;
        }
        if text == b"@" {
            out.extend_from_slice(&self.origin_wire);
            return Some(());
        }
        self.name.clear();
        self.name.extend_from_slice(text);
        if !text.ends_with(b".") {
            if self.origin_text != b"." {
                self.name.push(b'.');
            }
            self.name.extend_from_slice(&self.origin_text);
        }
        if self.name == b"." {
            out.push(0);
            return Some(());
        }
        let start = out.len();
        let body = &self.name[..self.name.len() - 1];
        for label in body.split(|&c| c == b'.') {
            if label.is_empty() || label.len() > 63 {
                return None;
            }
            out.push(label.len() as u8);
            out.extend(label.iter().map(u8::to_ascii_lowercase));
        }
        out.push(0);
        if out.len() - start > 255 {
            return None;
        }
        Some(())
    }

    /// Canonical rdata (without RDLENGTH) of `text` for `rtype`, or None.
    fn rdata(&mut self, rtype: u16, text: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(64);
        match rtype {
            1 => out.extend_from_slice(&ipv4(text)?),
            28 => out.extend_from_slice(&ipv6(text)?),
            15 => {
                if text.contains(&b';') {
                    return None;
                }
                let parts = fields(text);
                if parts.len() != 2 {
                    return None;
                }
                let pref = u16::try_from(digits(parts[0])?).ok()?;
                out.extend_from_slice(&pref.to_be_bytes());
                self.name_into(parts[1], &mut out)?;
            }
            6 => {
                if text.contains(&b';') || text.contains(&b'(') {
                    return None;
                }
                let parts: Vec<&[u8]> = text
                    .split(|&c| is_space(c))
                    .filter(|p| !p.is_empty())
                    .collect();
                if parts.len() != 7 {
                    return None;
                }
                self.name_into(parts[0], &mut out)?;
                self.name_into(parts[1], &mut out)?;
                for number in &parts[2..] {
                    let value = u32::try_from(digits(number)?).ok()?;
                    out.extend_from_slice(&value.to_be_bytes());
                }
            }
            43 => {
                let parts = fields_n(text, 3);
                if parts.len() != 4 {
                    return None;
                }
                let tag = u16::try_from(digits(parts[0])?).ok()?;
                let alg = u8::try_from(digits(parts[1])?).ok()?;
                let dtype = u8::try_from(digits(parts[2])?).ok()?;
                out.extend_from_slice(&tag.to_be_bytes());
                out.push(alg);
                out.push(dtype);
                let hexdigits: Vec<u8> =
                    parts[3].iter().copied().filter(|&c| !is_space(c)).collect();
                if hexdigits.len() % 2 != 0 {
                    return None;
                }
                for pair in hexdigits.chunks(2) {
                    out.push(hex_value(pair[0])? << 4 | hex_value(pair[1])?);
                }
            }
            16 => out = txt_wire(text)?,
            _ if is_name_type(rtype) => {
                if text.contains(&b';') || text.iter().any(|&c| is_space(c)) {
                    return None;
                }
                self.name_into(text, &mut out)?;
            }
            _ => return None,
        }
        Some(out)
    }

    /// Adds the lines of `data` (split at '\n') to `hasher`; returns the byte ranges of
    /// the lines left to the Python summer.
    pub fn add(&mut self, data: &[u8], hasher: &mut Hasher) -> Vec<(usize, usize)> {
        let mut deferred = Vec::new();
        let mut start = 0;
        let mut owner_text: Vec<u8> = Vec::new();
        let mut owner_wire: Vec<u8> = Vec::new();
        while start < data.len() {
            let end = memchr_newline(&data[start..]).map_or(data.len(), |i| start + i);
            let mut line = &data[start..end];
            let next = end + 1;
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            // A '\r' inside a line splits it for Python's splitlines(): leave that to Python.
            if line.contains(&b'\r') || !self.line(line, &mut owner_text, &mut owner_wire, hasher) {
                deferred.push((start, end.min(data.len())));
            }
            start = next;
        }
        deferred
    }

    /// One line: true when handled (summed or skipped as a comment/blank line).
    fn line(
        &mut self,
        line: &[u8],
        owner_text: &mut Vec<u8>,
        owner_wire: &mut Vec<u8>,
        hasher: &mut Hasher,
    ) -> bool {
        let f = fields(line);
        if f.is_empty() || f[0].starts_with(b";") {
            return true;
        }
        if f.len() < 4 || f[0].starts_with(b"$") {
            return false;
        }
        // `owner ttl class type rdata`, or `owner ttl type rdata` in the zone's class (IN),
        // as Knot writes its zone files: no type is spelled like a class.
        let (owner, ttl, rclass, rtype, text) = match class_of(f[2]) {
            Some(rclass) if f.len() == 5 => (f[0], f[1], rclass, f[3], f[4]),
            Some(_) => return false,
            None => {
                let g = fields_n(line, 3);
                if g.len() != 4 {
                    return false;
                }
                (g[0], g[1], 1, g[2], g[3])
            }
        };
        if owner != owner_text.as_slice() {
            let mut wire = Vec::with_capacity(64);
            if self.name_into(owner, &mut wire).is_none() {
                return false;
            }
            owner_text.clear();
            owner_text.extend_from_slice(owner);
            *owner_wire = wire;
        }
        let Some(ttl) = digits(ttl).filter(|&v| v < 1 << 32) else {
            return false;
        };
        let Some(rtype) = rtype_of(rtype) else {
            return false;
        };
        // Rdata repeats (the NS of a provider, glue addresses): converted once per text.
        let head = head_wire(rtype, rclass, ttl as u32);
        if let Some(rdata) = self.rdata_cache.get(&rtype).and_then(|m| m.get(text)) {
            add_record(hasher, owner_wire, &head, rdata);
        } else {
            let Some(value) = self.rdata(rtype, text) else {
                return false;
            };
            if value.len() > 0xFFFF {
                return false;
            }
            add_record(hasher, owner_wire, &head, &value);
            let cache = self.rdata_cache.entry(rtype).or_default();
            if cache.len() >= RDATA_CACHE_MAX {
                cache.clear();
            }
            cache.insert(text.to_vec(), value);
        }
        true
    }
}

/// The class a line's third field names; None for anything else (a type, when the line
/// leaves the class out; or a class spelled otherwise, which the Python summer reads).
fn class_of(text: &[u8]) -> Option<u16> {
    match text {
        b"IN" | b"in" => Some(1),
        b"CH" => Some(3),
        b"HS" => Some(4),
        _ => None,
    }
}

/// TYPE, CLASS and TTL as they stand in a record's wire form.
fn head_wire(rtype: u16, rclass: u16, ttl: u32) -> [u8; 8] {
    let mut head = [0u8; 8];
    head[..2].copy_from_slice(&rtype.to_be_bytes());
    head[2..4].copy_from_slice(&rclass.to_be_bytes());
    head[4..].copy_from_slice(&ttl.to_be_bytes());
    head
}

/// One canonical record (owner, TYPE CLASS TTL, RDLENGTH, rdata) into the hasher.
fn add_record(hasher: &mut Hasher, owner_wire: &[u8], head: &[u8; 8], rdata: &[u8]) {
    hasher.extend(owner_wire);
    hasher.extend(head);
    hasher.extend(&(rdata.len() as u16).to_be_bytes());
    hasher.extend(rdata);
    hasher.end_record();
}

/// Like Python's `text.split(None, n)`: at most n splits, the rest kept whole.
fn fields_n(text: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n + 1);
    let mut pos = 0;
    while pos < text.len() {
        while pos < text.len() && is_space(text[pos]) {
            pos += 1;
        }
        if pos >= text.len() {
            break;
        }
        if out.len() == n {
            let mut end = text.len();
            while end > pos && is_space(text[end - 1]) {
                end -= 1;
            }
            out.push(&text[pos..end]);
            break;
        }
        let start = pos;
        while pos < text.len() && !is_space(text[pos]) {
            pos += 1;
        }
        out.push(&text[start..pos]);
    }
    out
}

fn memchr_newline(data: &[u8]) -> Option<usize> {
    data.iter().position(|&c| c == b'\n')
}

/// Sum of the lines of `data` for the zone `origin`, and the lines left to Python.
pub fn sum_text(data: &[u8], origin_wire: &[u8], origin_text: &[u8]) -> TextSum {
    let mut summer = LineSummer::new(origin_wire, origin_text);
    let mut hasher = Hasher::new();
    let deferred = summer.add(data, &mut hasher);
    TextSum {
        sum: hasher.finish(),
        deferred,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Sum {
        let mut s = Sum::default();
        s.add_digest(blake2s_simd::blake2s(line.as_bytes()).as_bytes());
        s
    }

    #[test]
    fn relative_and_absolute_names_and_case_agree() {
        let origin = b"\x07example\x00";
        let a = sum_text(b"www 300 IN A 192.0.2.1\n", origin, b"example.");
        let b = sum_text(b"WWW.Example. 300 in A 192.0.2.1\n", origin, b"EXAMPLE.");
        assert!(a.deferred.is_empty() && b.deferred.is_empty());
        assert_eq!(a.sum, b.sum);
        assert_eq!(a.sum.records, 1);
        assert_ne!(a.sum, one("www 300 IN A 192.0.2.1"));
    }

    #[test]
    fn a_line_without_its_class_is_in_the_zones_class() {
        let origin = b"\x07example\x00";
        let with = sum_text(b"www 300 IN A 192.0.2.1\nwww 300 IN TXT \"a b\"\n", origin, b"example.");
        let without = sum_text(b"www\t300\tA\t192.0.2.1\nwww 300 TXT \"a b\"\n", origin, b"example.");
        assert!(without.deferred.is_empty(), "{:?}", without.deferred);
        assert_eq!(with.sum, without.sum);
        // Neither a class nor a type this summer knows: left to the Python summer.
        let other = sum_text(b"www 300 CLASS1 A 192.0.2.1\nwww 300 RRSIG A 8 1\n", origin, b"example.");
        assert_eq!(other.deferred.len(), 2);
    }

    #[test]
    fn unusual_lines_are_deferred_and_comments_skipped() {
        let origin = b"\x07example\x00";
        let data = b"; comment\n\nx 300 IN A 01.2.3.4\n$TTL 5\nx 300 IN RRSIG A 8 1 300 1 1 1 e. AA\na\\. 300 IN A 1.2.3.4\nx 300 IN A 1.2.3.4 ; c\r\nx 300 IN A 1.2.3.4";
        let got = sum_text(data, origin, b"example.");
        let lines: Vec<&[u8]> = got.deferred.iter().map(|&(s, e)| &data[s..e]).collect();
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert_eq!(got.sum.records, 1);
    }

    #[test]
    fn python_split_semantics() {
        assert_eq!(
            fields(b"a  b\tc d e f  "),
            vec![&b"a"[..], b"b", b"c", b"d", b"e f"]
        );
        assert_eq!(
            fields_n(b"1 2 3 AB CD ", 3),
            vec![&b"1"[..], b"2", b"3", b"AB CD"]
        );
        assert_eq!(txt_wire(b"\"a\" \"\"  "), Some(b"\x01a\x00".to_vec()));
        assert_eq!(txt_wire(b"\"a\\\"b\""), None);
        assert_eq!(txt_wire(b"word"), None);
        assert_eq!(ipv4(b"1.2.3.256"), None);
        assert_eq!(ipv6(b"2001:db8::1").map(|o| o[15]), Some(1));
    }
}
