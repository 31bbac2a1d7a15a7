//! The path information of a REQ (IBTA 12.6.5, table "REQ message contents"): 44 bytes, once
//! for the primary path (REQ bytes 52..96) and once for the alternate path (96..140).
//!
//! ```text
//!  byte 0-1   | Local Port LID                                 |
//!  byte 2-3   | Remote Port LID                                |
//!  byte 4-19  | Local Port GID                                 |
//!  byte 20-35 | Remote Port GID                                |
//!  byte 36-39 | Flow Label (20) | reserved (6) | Packet Rate (6) |
//!  byte 40    | Traffic Class                                  |
//!  byte 41    | Hop Limit                                      |
//!  byte 42    | SL (4) | Subnet Local | reserved (3)          |
//!  byte 43    | Local ACK Timeout (5) | reserved (3)           |
//! ```
//!
//! In the alternate path, bit 2 of byte 43 is the REQ's SAP Supported bit (Linux
//! `CM_REQ_SAP_SUPPORTED`); this view treats it as reserved and [`crate::cm::req`] owns it.

use core::fmt;

use super::{get_array, get_u16, Gid};
use crate::{fixed_view, read_u24, write_u24, Result};

/// Length of the path information.
pub const PATH_LEN: usize = 44;

mod field {
    use crate::cm::{Bits, Field};

    pub const LOCAL_PORT_LID: Field = 0..2;
    pub const REMOTE_PORT_LID: Field = 2..4;
    pub const LOCAL_PORT_GID: Field = 4..20;
    pub const REMOTE_PORT_GID: Field = 20..36;
    /// The 20-bit Flow Label: the top 20 bits of these three bytes.
    pub const FLOW_LABEL: Field = 36..39;
    pub const FLOW_LABEL_SHIFT: u32 = 4;
    pub const PACKET_RATE: Bits = Bits::new(39, 0, 6);
    pub const TRAFFIC_CLASS: usize = 40;
    pub const HOP_LIMIT: usize = 41;
    pub const SL: Bits = Bits::new(42, 4, 4);
    pub const SUBNET_LOCAL: Bits = Bits::new(42, 3, 1);
    pub const LOCAL_ACK_TIMEOUT: Bits = Bits::new(43, 3, 5);

    pub const RESERVED_BITS: [Bits; 4] = [
        Bits::new(38, 0, 4),
        Bits::new(39, 6, 2),
        Bits::new(42, 0, 3),
        Bits::new(43, 0, 3),
    ];
}

fixed_view!("CM path", PATH_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The Local Port LID field (0xffff on RoCE).
    pub fn local_port_lid(&self) -> u16 {
        get_u16(self.b(), field::LOCAL_PORT_LID)
    }
    /// The Remote Port LID field.
    pub fn remote_port_lid(&self) -> u16 {
        get_u16(self.b(), field::REMOTE_PORT_LID)
    }
    /// The Local Port GID field.
    pub fn local_port_gid(&self) -> Gid {
        get_array(self.b(), field::LOCAL_PORT_GID)
    }
    /// The Remote Port GID field.
    pub fn remote_port_gid(&self) -> Gid {
        get_array(self.b(), field::REMOTE_PORT_GID)
    }
    /// The Flow Label field (20 bits).
    pub fn flow_label(&self) -> u32 {
        read_u24(&self.b()[field::FLOW_LABEL]) >> field::FLOW_LABEL_SHIFT
    }
    /// The Packet Rate field (6 bits, IBTA encoding; 0 on a rxe REQ).
    pub fn packet_rate(&self) -> u8 {
        field::PACKET_RATE.get(self.b())
    }
    /// The Traffic Class field.
    pub fn traffic_class(&self) -> u8 {
        self.b()[field::TRAFFIC_CLASS]
    }
    /// The Hop Limit field.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }
    /// The SL field (4 bits).
    pub fn sl(&self) -> u8 {
        field::SL.get(self.b())
    }
    /// The Subnet Local bit.
    pub fn subnet_local(&self) -> bool {
        field::SUBNET_LOCAL.get_bool(self.b())
    }
    /// The Local ACK Timeout field (5 bits; 4.096 µs · 2^value).
    pub fn local_ack_timeout(&self) -> u8 {
        field::LOCAL_ACK_TIMEOUT.get(self.b())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Zeroes the reserved bits (and bit 2 of byte 43, see the module docs).
    pub fn clear_reserved(&mut self) {
        super::clear(self.b_mut(), &[], &field::RESERVED_BITS);
    }
    /// Sets the Local Port LID field.
    pub fn set_local_port_lid(&mut self, v: u16) {
        self.b_mut()[field::LOCAL_PORT_LID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Remote Port LID field.
    pub fn set_remote_port_lid(&mut self, v: u16) {
        self.b_mut()[field::REMOTE_PORT_LID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Local Port GID field.
    pub fn set_local_port_gid(&mut self, v: &Gid) {
        self.b_mut()[field::LOCAL_PORT_GID].copy_from_slice(v);
    }
    /// Sets the Remote Port GID field.
    pub fn set_remote_port_gid(&mut self, v: &Gid) {
        self.b_mut()[field::REMOTE_PORT_GID].copy_from_slice(v);
    }
    /// Sets the Flow Label field (low 20 bits of `v`); the reserved bits after it are kept.
    pub fn set_flow_label(&mut self, v: u32) {
        let b = &mut self.b_mut()[field::FLOW_LABEL];
        let low = read_u24(b) & ((1 << field::FLOW_LABEL_SHIFT) - 1);
        write_u24(b, (v << field::FLOW_LABEL_SHIFT) | low);
    }
    /// Sets the Packet Rate field (low 6 bits of `v`).
    pub fn set_packet_rate(&mut self, v: u8) {
        field::PACKET_RATE.set(self.b_mut(), v);
    }
    /// Sets the Traffic Class field.
    pub fn set_traffic_class(&mut self, v: u8) {
        self.b_mut()[field::TRAFFIC_CLASS] = v;
    }
    /// Sets the Hop Limit field.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.b_mut()[field::HOP_LIMIT] = v;
    }
    /// Sets the SL field (low 4 bits of `v`).
    pub fn set_sl(&mut self, v: u8) {
        field::SL.set(self.b_mut(), v);
    }
    /// Sets the Subnet Local bit.
    pub fn set_subnet_local(&mut self, v: bool) {
        field::SUBNET_LOCAL.set_bool(self.b_mut(), v);
    }
    /// Sets the Local ACK Timeout field (low 5 bits of `v`).
    pub fn set_local_ack_timeout(&mut self, v: u8) {
        field::LOCAL_ACK_TIMEOUT.set(self.b_mut(), v);
    }
}

/// One parsed path of a REQ (primary or alternate). An alternate path of all zeros means
/// "no alternate path".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathRepr {
    /// Local Port LID (0xffff on RoCE: there are no LIDs).
    pub local_port_lid: u16,
    /// Remote Port LID.
    pub remote_port_lid: u16,
    /// Local Port GID: on RoCEv2 the sender's IP address.
    pub local_port_gid: Gid,
    /// Remote Port GID: on RoCEv2 the receiver's IP address.
    pub remote_port_gid: Gid,
    /// Flow Label (20 bits).
    pub flow_label: u32,
    /// Packet Rate (6 bits).
    pub packet_rate: u8,
    /// Traffic Class.
    pub traffic_class: u8,
    /// Hop Limit.
    pub hop_limit: u8,
    /// Service Level (4 bits).
    pub sl: u8,
    /// Subnet Local: the remote port is on the local subnet (no GRH needed on IB).
    pub subnet_local: bool,
    /// Local ACK Timeout (5 bits).
    pub local_ack_timeout: u8,
}

impl PathRepr {
    /// Parses the 44 bytes of a path.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<PathRepr> {
        packet.check_len()?;
        Ok(PathRepr {
            local_port_lid: packet.local_port_lid(),
            remote_port_lid: packet.remote_port_lid(),
            local_port_gid: packet.local_port_gid(),
            remote_port_gid: packet.remote_port_gid(),
            flow_label: packet.flow_label(),
            packet_rate: packet.packet_rate(),
            traffic_class: packet.traffic_class(),
            hop_limit: packet.hop_limit(),
            sl: packet.sl(),
            subnet_local: packet.subnet_local(),
            local_ack_timeout: packet.local_ack_timeout(),
        })
    }

    /// The path length (always 44).
    pub const fn buffer_len(&self) -> usize {
        PATH_LEN
    }

    /// Writes the path, reserved bits as zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.clear_reserved();
        packet.set_local_port_lid(self.local_port_lid);
        packet.set_remote_port_lid(self.remote_port_lid);
        packet.set_local_port_gid(&self.local_port_gid);
        packet.set_remote_port_gid(&self.remote_port_gid);
        packet.set_flow_label(self.flow_label);
        packet.set_packet_rate(self.packet_rate);
        packet.set_traffic_class(self.traffic_class);
        packet.set_hop_limit(self.hop_limit);
        packet.set_sl(self.sl);
        packet.set_subnet_local(self.subnet_local);
        packet.set_local_ack_timeout(self.local_ack_timeout);
    }
}

impl fmt::Display for PathRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gid = |g: Gid| std::net::Ipv6Addr::from(g);
        write!(
            f,
            "{} -> {} flow_label={:#x} hop_limit={} tclass={} sl={}",
            gid(self.local_port_gid),
            gid(self.remote_port_gid),
            self.flow_label,
            self.hop_limit,
            self.traffic_class,
            self.sl
        )
    }
}

#[cfg(test)]
pub(crate) mod test {
    use super::*;
    use crate::Error;

    // The primary path of the REQ in frame 1 of tests/data/rping_rdmacm.pcap (REQ bytes
    // 52..96): LIDs 0xffff, GIDs ::ffff:10.99.0.3 -> ::ffff:10.99.0.2, Flow Label 0x622ff,
    // Packet Rate 0, Traffic Class 0, Hop Limit 64, SL 0, Local ACK Timeout 19.
    static PACKET_BYTES: [u8; PATH_LEN] = [
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
        0xff, 0x0a, 0x63, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xff, 0xff, 0x0a, 0x63, 0x00, 0x02, 0x62, 0x2f, 0xf0, 0x00, 0x00, 0x40, 0x00, 0x98,
    ];

    const LOCAL_GID: Gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, 3];
    const REMOTE_GID: Gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, 2];

    pub(crate) fn repr() -> PathRepr {
        PathRepr {
            local_port_lid: 0xffff,
            remote_port_lid: 0xffff,
            local_port_gid: LOCAL_GID,
            remote_port_gid: REMOTE_GID,
            flow_label: 0x622ff,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 19,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.local_port_lid(), 0xffff);
        assert_eq!(p.remote_port_lid(), 0xffff);
        assert_eq!(p.local_port_gid(), LOCAL_GID);
        assert_eq!(p.remote_port_gid(), REMOTE_GID);
        // Wireshark 4.0 shows "Primary Flow Label: 0x00622" and "Primary Packet Rate: 0x22":
        // it reads the flow label from 3 bytes and the rate from the first byte of the word
        // (see the pdml: both at the same position). IBTA and Linux put the 20-bit label in
        // the top of the word and the rate in the low 6 bits of byte 39.
        assert_eq!(p.flow_label(), 0x622ff);
        assert_eq!(p.packet_rate(), 0);
        assert_eq!(p.traffic_class(), 0);
        assert_eq!(p.hop_limit(), 0x40);
        assert_eq!(p.sl(), 0);
        assert!(!p.subnet_local());
        assert_eq!(p.local_ack_timeout(), 0x13);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; PATH_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        p.set_local_port_lid(0xffff);
        p.set_remote_port_lid(0xffff);
        p.set_local_port_gid(&LOCAL_GID);
        p.set_remote_port_gid(&REMOTE_GID);
        p.set_flow_label(0x622ff);
        p.set_packet_rate(0);
        p.set_traffic_class(0);
        p.set_hop_limit(0x40);
        p.set_sl(0);
        p.set_subnet_local(false);
        p.set_local_ack_timeout(0x13);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(PathRepr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; PATH_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..43]).unwrap_err(),
            Error::Truncated {
                what: "CM path",
                need: 44,
                have: 43
            }
        );
    }

    #[test]
    fn test_bit_fields_do_not_overlap() {
        let mut bytes = [0u8; PATH_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_flow_label(0xfffff);
        p.set_packet_rate(0x3f);
        p.set_sl(0xf);
        p.set_subnet_local(true);
        p.set_local_ack_timeout(0x1f);
        assert_eq!(bytes[36..44], [0xff, 0xff, 0xf0, 0x3f, 0, 0, 0xf8, 0xf8]);
        assert_eq!(
            repr().to_string(),
            "::ffff:10.99.0.3 -> ::ffff:10.99.0.2 flow_label=0x622ff hop_limit=64 tclass=0 sl=0"
        );
    }
}
