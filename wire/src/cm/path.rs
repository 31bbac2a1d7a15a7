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

use super::layout::{self, message, Access, Bits};
use super::Gid;
use crate::{read_u24, write_u24};

/// Length of the path information.
pub const PATH_LEN: usize = 44;

/// The place of the 20-bit Flow Label: the top 20 bits of bytes 36..39. Its setter keeps the
/// 4 reserved bits below it.
struct FlowLabel;

impl FlowLabel {
    const BYTES: layout::Field = 36..39;
    const SHIFT: u32 = 4;
}

impl Access<u32> for FlowLabel {
    fn get(&self, b: &[u8]) -> u32 {
        read_u24(&b[Self::BYTES]) >> Self::SHIFT
    }
    fn set(&self, b: &mut [u8], v: u32) {
        let b = &mut b[Self::BYTES];
        let low = read_u24(b) & ((1 << Self::SHIFT) - 1);
        write_u24(b, (v << Self::SHIFT) | low);
    }
}

message! {
    "CM path", PATH_LEN;
    /// One parsed path of a REQ (primary or alternate). An alternate path of all zeros means
    /// "no alternate path".
    #[derive(Default)]
    pub struct PathRepr {
        /// Local Port LID (0xffff on RoCE: there are no LIDs).
        value local_port_lid / set_local_port_lid: u16 = 0..2,
        /// Remote Port LID.
        value remote_port_lid / set_remote_port_lid: u16 = 2..4,
        /// Local Port GID: on RoCEv2 the sender's IP address.
        array local_port_gid / set_local_port_gid: Gid = 4..20,
        /// Remote Port GID: on RoCEv2 the receiver's IP address.
        array remote_port_gid / set_remote_port_gid: Gid = 20..36,
        /// Flow Label (20 bits).
        value flow_label / set_flow_label: u32 = FlowLabel,
        /// Packet Rate (6 bits, IBTA encoding; 0 on a rxe REQ).
        value packet_rate / set_packet_rate: u8 = Bits::new(39, 0, 6),
        /// Traffic Class.
        value traffic_class / set_traffic_class: u8 = 40,
        /// Hop Limit.
        value hop_limit / set_hop_limit: u8 = 41,
        /// Service Level (4 bits).
        value sl / set_sl: u8 = Bits::new(42, 4, 4),
        /// Subnet Local: the remote port is on the local subnet (no GRH needed on IB).
        value subnet_local / set_subnet_local: bool = Bits::new(42, 3, 1),
        /// Local ACK Timeout (5 bits; 4.096 µs · 2^value).
        value local_ack_timeout / set_local_ack_timeout: u8 = Bits::new(43, 3, 5),
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the reserved bits (and bit 2 of byte 43, see the module docs).
    pub fn clear_reserved(&mut self) {
        let reserved = [
            Bits::new(38, 0, 4),
            Bits::new(39, 6, 2),
            Bits::new(42, 0, 3),
            Bits::new(43, 0, 3),
        ];
        layout::clear(self.b_mut(), &[], &reserved);
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

    crate::cm::layout::message_tests!(PathRepr, "CM path", 44);

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
