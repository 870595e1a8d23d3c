//! The headers of a queued packet (IPv4 or IPv6, then TCP), and TCP resets forged from them.
//! Pure: bytes in, values or bytes out.
//!
//! A direction that `inspect`s its packets is queued with the first `HEADER_COPY` bytes of
//! each (copy mode PACKET with a short range): enough for the IP and TCP headers, from which
//! linkem counts bytes, follows TCP connections and cuts one with resets. A reset is accepted
//! by a Linux socket only when its sequence number is exactly the next one that socket
//! expects (RFC 5961; one merely inside the window draws a challenge ACK instead), and a
//! packet an end sends carries exactly that number in its acknowledgment field, so a reset
//! towards the sender of a packet takes the packet's `ack` as its `seq`.

use std::net::IpAddr;

/// Bytes copied per packet when a direction inspects headers: IPv4 (up to 60) or IPv6 (40)
/// plus TCP (up to 60).
pub const HEADER_COPY: u32 = 128;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// One way of a TCP connection: from `src`:`sport` to `dst`:`dport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ends {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl Ends {
    pub fn reversed(&self) -> Ends {
        Ends {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
        }
    }

    /// The connection whichever way a packet goes (the same for both directions).
    pub fn flow(&self) -> Ends {
        if (self.src, self.sport) <= (self.dst, self.dport) {
            *self
        } else {
            self.reversed()
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} > {}",
            sock(self.src, self.sport),
            sock(self.dst, self.dport)
        )
    }
}

fn sock(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

/// A TCP segment's header fields that linkem uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub ends: Ends,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// Payload bytes (from the IP length, not from what was copied).
    pub payload: u32,
}

impl Segment {
    /// The sequence number right after this segment (SYN and FIN count one each).
    pub fn seq_end(&self) -> u32 {
        let mut n = self.payload;
        if self.flags & SYN != 0 {
            n += 1;
        }
        if self.flags & FIN != 0 {
            n += 1;
        }
        self.seq.wrapping_add(n)
    }
}

/// What the headers say about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// The whole IP packet's length, as its header says.
    pub len: u32,
    pub tcp: Option<Segment>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parse the headers at the start of an IP packet (possibly cut after its headers). None
/// when it is not IPv4/IPv6 or too short to say its length.
pub fn parse(pkt: &[u8]) -> Option<Packet> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            let len = u32::from(be16(pkt, 2));
            let fragment = be16(pkt, 6) & 0x1fff != 0;
            let src = IpAddr::from(<[u8; 4]>::try_from(&pkt[12..16]).ok()?);
            let dst = IpAddr::from(<[u8; 4]>::try_from(&pkt[16..20]).ok()?);
            let tcp = if pkt[9] == 6 && !fragment && ihl >= 20 {
                segment(pkt, ihl, len, src, dst)
            } else {
                None
            };
            Some(Packet { len, tcp })
        }
        6 if pkt.len() >= 40 => {
            let len = u32::from(be16(pkt, 4)) + 40;
            let src = IpAddr::from(<[u8; 16]>::try_from(&pkt[8..24]).ok()?);
            let dst = IpAddr::from(<[u8; 16]>::try_from(&pkt[24..40]).ok()?);
            // Only TCP right after the fixed header (no extension headers).
            let tcp = if pkt[6] == 6 {
                segment(pkt, 40, len, src, dst)
            } else {
                None
            };
            Some(Packet { len, tcp })
        }
        _ => None,
    }
}

fn segment(pkt: &[u8], at: usize, ip_len: u32, src: IpAddr, dst: IpAddr) -> Option<Segment> {
    if pkt.len() < at + 20 {
        return None;
    }
    let data_offset = u32::from(pkt[at + 12] >> 4) * 4;
    let headers = at as u32 + data_offset;
    Some(Segment {
        ends: Ends {
            src,
            dst,
            sport: be16(pkt, at),
            dport: be16(pkt, at + 2),
        },
        seq: be32(pkt, at + 4),
        ack: be32(pkt, at + 8),
        flags: pkt[at + 13],
        payload: ip_len.saturating_sub(headers),
    })
}

/// Ones' complement sum of 16-bit words (the Internet checksum before its final inversion).
fn sum16(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// A bare TCP reset from `ends.src` to `ends.dst` with sequence number `seq`: an IP packet
/// ready for a raw socket (IP_HDRINCL), both checksums filled in.
pub fn reset(ends: &Ends, seq: u32) -> Vec<u8> {
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&ends.sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&ends.dport.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = RST;
    let mut out = Vec::with_capacity(60);
    let pseudo = match (ends.src, ends.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&40u16.to_be_bytes());
            ip[6] = 0x40; // don't fragment
            ip[8] = 64;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let check = fold(sum16(0, &ip));
            ip[10..12].copy_from_slice(&check.to_be_bytes());
            out.extend_from_slice(&ip);
            sum16(sum16(6 + 20, &s.octets()), &d.octets())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&20u16.to_be_bytes());
            ip[6] = 6;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            out.extend_from_slice(&ip);
            sum16(sum16(6 + 20, &s.octets()), &d.octets())
        }
        _ => unreachable!("one connection has one address family"),
    };
    let check = fold(sum16(pseudo, &tcp));
    tcp[16..18].copy_from_slice(&check.to_be_bytes());
    out.extend_from_slice(&tcp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// An IPv4 TCP packet as the kernel would queue it (`payload` bytes of data).
    fn v4(seq: u32, ack: u32, flags: u8, payload: usize) -> Vec<u8> {
        let ends = Ends {
            src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 6)),
            sport: 53,
            dport: 40000,
        };
        let mut p = reset(&ends, seq);
        p[2..4].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        p[28..32].copy_from_slice(&ack.to_be_bytes());
        p[33] = flags;
        p.resize(40 + payload, 0xab);
        p
    }

    #[test]
    fn parses_ipv4_tcp() {
        let p = parse(&v4(1000, 77, ACK, 1448)).unwrap();
        assert_eq!(p.len, 1488);
        let s = p.tcp.unwrap();
        assert_eq!((s.seq, s.ack, s.flags, s.payload), (1000, 77, ACK, 1448));
        assert_eq!(s.ends.sport, 53);
        assert_eq!(s.seq_end(), 2448);
        assert_eq!(s.ends.describe(), "198.18.0.2:53 > 198.18.0.6:40000");
    }

    #[test]
    fn cut_copy_still_gives_length_and_tcp() {
        // Only HEADER_COPY bytes were copied: lengths come from the IP header.
        let full = v4(5, 6, ACK, 1448);
        let p = parse(&full[..HEADER_COPY as usize]).unwrap();
        assert_eq!(p.len, 1488);
        assert_eq!(p.tcp.unwrap().payload, 1448);
    }

    #[test]
    fn udp_and_fragments_have_no_segment() {
        let mut p = v4(1, 2, ACK, 10);
        p[9] = 17;
        assert_eq!(parse(&p).unwrap().tcp, None);
        let mut p = v4(1, 2, ACK, 10);
        p[6..8].copy_from_slice(&0x0010u16.to_be_bytes()); // a later fragment
        assert_eq!(parse(&p).unwrap().tcp, None);
        assert_eq!(parse(&[0x45, 0, 0]), None);
        assert_eq!(parse(&[]), None);
    }

    #[test]
    fn flow_is_the_same_both_ways() {
        let s = parse(&v4(1, 2, ACK, 0)).unwrap().tcp.unwrap();
        assert_eq!(s.ends.flow(), s.ends.reversed().flow());
        assert_ne!(s.ends, s.ends.reversed());
    }

    #[test]
    fn ipv4_reset_checksums_verify() {
        let ends = Ends {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            sport: 853,
            dport: 51000,
        };
        let p = reset(&ends, 0xdead_beef);
        assert_eq!(p.len(), 40);
        // A correct checksum sums (with itself) to 0xffff, i.e. folds to 0.
        assert_eq!(fold(sum16(0, &p[..20])), 0);
        let pseudo = sum16(sum16(26, &[10, 0, 0, 1]), &[10, 0, 0, 2]);
        assert_eq!(fold(sum16(pseudo, &p[20..])), 0);
        let s = parse(&p).unwrap().tcp.unwrap();
        assert_eq!((s.seq, s.flags, s.payload), (0xdead_beef, RST, 0));
        assert_eq!(s.ends, ends);
    }

    #[test]
    fn known_checksum() {
        // The RFC 1071 example words: 0001 f203 f4f5 f6f7 sum to ddf2, checksum 220d.
        assert_eq!(
            fold(sum16(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            0x220d
        );
    }

    #[test]
    fn ipv6_reset_parses_back() {
        let ends = Ends {
            src: IpAddr::V6(Ipv6Addr::LOCALHOST),
            dst: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
            sport: 53,
            dport: 4000,
        };
        let p = reset(&ends, 9);
        assert_eq!(p.len(), 60);
        let got = parse(&p).unwrap();
        assert_eq!(got.len, 60);
        assert_eq!(got.tcp.unwrap().ends, ends);
        let pseudo = sum16(sum16(26, &ends.src_octets()), &ends.dst_octets());
        assert_eq!(fold(sum16(pseudo, &p[40..])), 0);
    }

    impl Ends {
        fn src_octets(&self) -> Vec<u8> {
            match self.src {
                IpAddr::V4(a) => a.octets().to_vec(),
                IpAddr::V6(a) => a.octets().to_vec(),
            }
        }
        fn dst_octets(&self) -> Vec<u8> {
            match self.dst {
                IpAddr::V4(a) => a.octets().to_vec(),
                IpAddr::V6(a) => a.octets().to_vec(),
            }
        }
    }
}
