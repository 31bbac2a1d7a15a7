//! The Invariant CRC of RoCEv2 (IBTA annex A17.4.2, "ICRC", with IBTA 7.8.1).
//!
//! The ICRC is the standard CRC-32 (the Ethernet polynomial, as `crc32fast` computes it) over:
//!
//! 1. 8 bytes of `0xFF` standing in for the InfiniBand LRH;
//! 2. the IP header with its variant fields set to all ones — IPv4: Type of Service, TTL and
//!    header checksum; IPv6: Traffic Class, Flow Label and Hop Limit;
//! 3. the UDP header with its checksum set to all ones;
//! 4. the BTH with byte 4 (FECN, BECN, reserved) set to all ones;
//! 5. everything after the BTH up to the ICRC: extension headers, payload, pad.
//!
//! It travels in the last 4 bytes of the UDP payload, least significant byte first.
//!
//! [`Icrc`] is incremental, so a sender can checksum the headers it built and then the payload
//! straight from registered memory, in as many pieces as it has, without gathering the packet.
//! Registered memory it reads through raw pointers only ([`Icrc::update_raw`]; `icrc/raw.rs`
//! says why), with carry-less multiplication where the CPU has it (`icrc/clmul.rs`).
//! [`with_ipv4_ident`] moves an IPv4 packet's ICRC to another IP Identification, and
//! [`ipv4_ident_matching`] finds the Identification for which a received ICRC matches, for a
//! receiver that cannot see it (a UDP socket's).

use crate::{bth, check_len, Result};

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod clmul;
mod ident;
#[allow(unsafe_code)]
mod raw;
#[cfg(test)]
#[allow(unsafe_code)]
mod raw_tests;
mod solve;
pub use ident::with_ipv4_ident;
pub use solve::ipv4_ident_matching;

/// ICRC length in bytes.
pub const ICRC_LEN: usize = 4;

/// The 8 bytes of all ones that stand in for the LRH.
pub const LRH_PLACEHOLDER: [u8; 8] = [0xff; 8];
const UDP_HEADER_LEN: usize = 8;
const UDP_CHECKSUM: core::ops::Range<usize> = 6..8;
const IPV4_MIN_HEADER: usize = 20;
const IPV4_MAX_HEADER: usize = 60;
const IPV4_TOS: usize = 1;
const IPV4_TTL: usize = 8;
const IPV4_CHECKSUM: core::ops::Range<usize> = 10..12;
const IPV6_HEADER: usize = 40;
const IPV6_HOP_LIMIT: usize = 7;
/// LRH placeholder, the longest IP header, UDP header, BTH.
const MASKED_MAX: usize = 8 + IPV4_MAX_HEADER + UDP_HEADER_LEN + bth::HEADER_LEN;

/// An ICRC computation in progress.
#[derive(Debug, Clone)]
pub struct Icrc {
    /// The CRC of the bytes fed so far (initial value and final xor applied, as
    /// `crc32fast::Hasher::finalize` gives it).
    crc: u32,
}

impl Icrc {
    /// Starts an ICRC over the masked invariant headers: `ip_header` (IPv4 with its options, or
    /// the 40-byte IPv6 header — its version nibble says which), the 8-byte UDP header and the
    /// 12-byte BTH. Feed the rest of the packet (extension headers, payload, pad) with
    /// [`Icrc::update`].
    pub fn start(ip_header: &[u8], udp_header: &[u8], bth: &[u8]) -> Result<Icrc> {
        check_len("IP header", ip_header, 1)?;
        check_len("UDP header", udp_header, UDP_HEADER_LEN)?;
        check_len("BTH", bth, bth::HEADER_LEN)?;
        // The masked headers are gathered into one buffer and fed at once: CRC-32 over one
        // slice of 48 to 88 bytes costs a fraction of four short updates.
        let mut masked = [0u8; MASKED_MAX];
        masked[..LRH_PLACEHOLDER.len()].copy_from_slice(&LRH_PLACEHOLDER);
        let mut at = LRH_PLACEHOLDER.len();
        let ip_len = ip_header_len(ip_header)?;
        masked[at..at + ip_len].copy_from_slice(&ip_header[..ip_len]);
        at += mask_ip_header(&mut masked[at..at + ip_len])?;

        let udp = &mut masked[at..at + UDP_HEADER_LEN];
        udp.copy_from_slice(&udp_header[..UDP_HEADER_LEN]);
        mask_udp_header(udp)?;
        at += UDP_HEADER_LEN;

        let b = &mut masked[at..at + bth::HEADER_LEN];
        b.copy_from_slice(&bth[..bth::HEADER_LEN]);
        b[bth::ICRC_MASKED_BYTE] = 0xff;
        at += bth::HEADER_LEN;

        Ok(Icrc {
            crc: raw::update_slice(0, &masked[..at]),
        })
    }

    /// Starts an ICRC over `masked`, which holds the ICRC's view of a packet's first bytes as
    /// [`crate::frame::DatagramRepr::emit_masked`] writes it: the LRH placeholder and the
    /// masked IP and UDP headers, then from `bth_at` on the BTH and whatever follows it, as
    /// sent. The BTH's masked byte is set to all ones for the computation and put back, so the
    /// bytes from `bth_at` on can go on the wire as they are: the whole view is checksummed in
    /// one pass, without the copy [`Icrc::start`] makes.
    pub fn start_masked(masked: &mut [u8], bth_at: usize) -> Result<Icrc> {
        check_len("masked headers", masked, bth_at + bth::HEADER_LEN)?;
        let at = bth_at + bth::ICRC_MASKED_BYTE;
        let sent = core::mem::replace(&mut masked[at], 0xff);
        let crc = raw::update_slice(0, masked);
        masked[at] = sent;
        Ok(Icrc { crc })
    }

    /// Feeds the next bytes after the BTH.
    pub fn update(&mut self, bytes: &[u8]) {
        self.crc = raw::update_slice(self.crc, bytes);
    }

    /// Feeds the next `len` bytes after the BTH from `ptr`, reading them through the pointer
    /// only (no reference to them is formed): for a payload in memory that others may write
    /// meanwhile, as an application may write memory it registered.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be valid for reads (allocated, and not freed or unmapped during
    /// the call). Others may write those bytes concurrently (the application, the kernel, a
    /// device): the ICRC is then unspecified — some mix of the old and new bytes — but that
    /// is all; nothing here assumes they stay unchanged.
    #[allow(unsafe_code)]
    pub unsafe fn update_raw(&mut self, ptr: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        self.crc = unsafe { raw::update(self.crc, ptr, len) };
    }

    /// The ICRC value. On the wire it is `value.to_le_bytes()`.
    pub fn finish(self) -> u32 {
        self.crc
    }
}

/// The length of `ip`, an IPv4 header (with its options) or the 40-byte IPv6 header, as its
/// first byte gives it.
fn ip_header_len(ip: &[u8]) -> Result<usize> {
    check_len("IP header", ip, 1)?;
    let len = if ip[0] >> 4 == 6 {
        IPV6_HEADER
    } else {
        ((ip[0] & 0x0f) as usize * 4).clamp(IPV4_MIN_HEADER, IPV4_MAX_HEADER)
    };
    check_len("IP header", ip, len)?;
    Ok(len)
}

/// Sets the fields of the IP header `ip` that the ICRC masks to all ones (A17.4.2): IPv4
/// Type of Service, TTL and header checksum; IPv6 Traffic Class, Flow Label and Hop Limit.
/// Its version nibble says which. Returns the header's length. The one place these fields are
/// listed: for a received header ([`Icrc::start`]) and for one written to be checksummed
/// ([`crate::frame::IpHeader::emit_masked`]).
pub fn mask_ip_header(ip: &mut [u8]) -> Result<usize> {
    let len = ip_header_len(ip)?;
    if len == IPV6_HEADER {
        ip[0] |= 0x0f; // traffic class, high nibble
        ip[1..4].fill(0xff); // traffic class, low nibble; flow label
        ip[IPV6_HOP_LIMIT] = 0xff;
    } else {
        ip[IPV4_TOS] = 0xff;
        ip[IPV4_TTL] = 0xff;
        ip[IPV4_CHECKSUM].fill(0xff);
    }
    Ok(len)
}

/// Sets the UDP checksum of `udp`, which the ICRC masks, to all ones.
pub fn mask_udp_header(udp: &mut [u8]) -> Result<()> {
    check_len("UDP header", udp, UDP_HEADER_LEN)?;
    udp[UDP_CHECKSUM].fill(0xff);
    Ok(())
}

/// The ICRC of a whole packet: `ip_header`, then `udp_datagram` (UDP header and payload, the
/// ICRC's own 4 bytes excluded).
pub fn compute(ip_header: &[u8], udp_datagram: &[u8]) -> Result<u32> {
    check_len(
        "UDP datagram",
        udp_datagram,
        UDP_HEADER_LEN + bth::HEADER_LEN,
    )?;
    let (udp, roce) = udp_datagram.split_at(UDP_HEADER_LEN);
    let (bth, rest) = roce.split_at(bth::HEADER_LEN);
    let mut icrc = Icrc::start(ip_header, udp, bth)?;
    icrc.update(rest);
    Ok(icrc.finish())
}

#[cfg(test)]
mod test {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// scapy's RoCE test vector: a UC SEND_ONLY over IPv4, given from the IP header on.
    const UC_SEND_ONLY: &str = "45010040047840004011b4d5c0a80007c0a80007c00012b7002caca22460\
        ffff000000d300cf17104630818be28935d90e9a95505401be885e50000078f353f3";

    #[test]
    fn golden_uc_send_only() {
        let p = hex(UC_SEND_ONLY);
        let (ip, udp) = p.split_at(20);
        let icrc = compute(ip, &udp[..udp.len() - 4]).unwrap();
        assert_eq!(icrc.to_le_bytes(), [0x78, 0xf3, 0x53, 0xf3]);
    }

    #[test]
    fn incremental_equals_one_shot() {
        let p = hex(UC_SEND_ONLY);
        let (ip, udp) = p.split_at(20);
        let mut icrc = Icrc::start(ip, &udp[..8], &udp[8..20]).unwrap();
        for chunk in udp[20..udp.len() - 4].chunks(3) {
            icrc.update(chunk);
        }
        assert_eq!(icrc.finish(), compute(ip, &udp[..udp.len() - 4]).unwrap());
    }

    #[test]
    fn masked_fields_do_not_matter() {
        let mut p = hex(UC_SEND_ONLY);
        let base = compute(&p[..20], &p[20..p.len() - 4]).unwrap();
        for i in [1, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4] {
            p[i] ^= 0x5a;
        }
        assert_eq!(compute(&p[..20], &p[20..p.len() - 4]).unwrap(), base);
        p[4] ^= 1; // the IP ID is covered
        assert_ne!(compute(&p[..20], &p[20..p.len() - 4]).unwrap(), base);
    }

    #[test]
    fn ipv6_masks_traffic_class_flow_label_and_hop_limit() {
        let mut ip6 = [0u8; 40];
        ip6[0] = 0x60;
        ip6[7] = 64;
        let udp = [0xc0, 0x00, 0x12, 0xb7, 0, 24, 0, 0];
        let bth = [0x04, 0, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 1];
        let base = Icrc::start(&ip6, &udp, &bth).unwrap().finish();
        ip6[0] = 0x6f;
        ip6[1] = 0xab;
        ip6[3] = 0x01;
        ip6[7] = 1;
        assert_eq!(Icrc::start(&ip6, &udp, &bth).unwrap().finish(), base);
        ip6[8] = 1; // the source address is covered
        assert_ne!(Icrc::start(&ip6, &udp, &bth).unwrap().finish(), base);
    }
}
