//! Re-injection of duplicate packets through raw IP sockets (IPPROTO_RAW implies
//! IP_HDRINCL / IPV6_HDRINCL): the copy leaves the router as a locally sent packet, so it
//! passes the OUTPUT chain, not FORWARD, and is not queued to linkem again.
//!
//! Every packet sent here carries the mark `OWN_MARK` (SO_MARK): where linkem runs on an end
//! host (a secondary of an inventory, harness/remote/hostlink.py), its queues take that
//! host's own INPUT and OUTPUT traffic, and the rules leave marked packets alone, or a reset
//! linkem forged would be queued to it again, as one of the connection it cut.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The mark of the packets linkem sends itself (duplicates, resets): "lk".
pub const OWN_MARK: u32 = 0x6c6b;

pub struct RawSender {
    v4: OwnedFd,
    v6: Option<OwnedFd>,
}

fn raw_socket(family: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; checked before use.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_RAW,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mark = OWN_MARK;
    // SAFETY: mark lives across the call; its size is given.
    let set = unsafe {
        libc::setsockopt(
            owned.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MARK,
            &mark as *const u32 as *const _,
            std::mem::size_of::<u32>() as u32,
        )
    };
    if set < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

impl RawSender {
    pub fn new() -> io::Result<Self> {
        Ok(RawSender {
            v4: raw_socket(libc::AF_INET)?,
            v6: raw_socket(libc::AF_INET6).ok(),
        })
    }

    /// Send a copy of `pkt`, a whole IPv4 or IPv6 packet as queued by the kernel.
    pub fn send(&self, pkt: &[u8]) -> io::Result<()> {
        let version = pkt.first().map(|b| b >> 4);
        let r = match version {
            Some(4) if pkt.len() >= 20 => {
                // SAFETY: plain data, zero-initialised.
                let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                a.sin_family = libc::AF_INET as libc::sa_family_t;
                a.sin_addr.s_addr = u32::from_ne_bytes(pkt[16..20].try_into().unwrap());
                // SAFETY: pkt and a are valid for their lengths.
                unsafe {
                    libc::sendto(
                        self.v4.as_raw_fd(),
                        pkt.as_ptr() as *const _,
                        pkt.len(),
                        0,
                        &a as *const _ as *const libc::sockaddr,
                        std::mem::size_of::<libc::sockaddr_in>() as u32,
                    )
                }
            }
            Some(6) if pkt.len() >= 40 => {
                let Some(v6) = &self.v6 else {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "no IPv6 raw socket",
                    ));
                };
                // SAFETY: plain data, zero-initialised.
                let mut a: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                a.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                a.sin6_addr.s6_addr.copy_from_slice(&pkt[24..40]);
                // SAFETY: pkt and a are valid for their lengths.
                unsafe {
                    libc::sendto(
                        v6.as_raw_fd(),
                        pkt.as_ptr() as *const _,
                        pkt.len(),
                        0,
                        &a as *const _ as *const libc::sockaddr,
                        std::mem::size_of::<libc::sockaddr_in6>() as u32,
                    )
                }
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not an IP packet",
                ))
            }
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
