//! The RDMA IP CM Service (IBTA annex A11, and rdma_cm's `cma_hdr`): how IP-addressed
//! connections (the TCP-like port spaces of rdma_cm) ride on the CM.
//!
//! * **Service IDs** (A11.2): `0x0000_0000_01` · port space (8 bits) · port (16 bits); rdma_cm's
//!   port spaces are TCP 0x06, UDP 0x11, IB 0x3F and IPoIB 0x02 (written 0x0106, 0x0111,
//!   0x013F, 0x0002 in librdmacm, the leading 0x01 included).
//! * **The private data header** (A11.3), the first 36 bytes of the private data of a REQ or a
//!   SIDR_REQ, so the listener learns the IP addresses the connection is between:
//!
//! ```text
//!  byte 0     | MajV (4) | MinV (4)   CM IP header version: 0
//!  byte 1     | IPV (4)  | reserved   IP version: 4 or 6
//!  byte 2-3   | Source Port                                   the active side's port
//!  byte 4-19  | Source IP Address      (IPv4: in bytes 16-19, zeros before)
//!  byte 20-35 | Destination IP Address (IPv4: in bytes 32-35, zeros before)
//! ```
//!
//! So a REQ carries at most 92 - 36 = 56 bytes of the user's private data, a SIDR_REQ
//! 216 - 36 = 180.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// Length of the private data header.
pub const HEADER_LEN: usize = 36;

/// rdma_cm's port spaces (`enum rdma_port_space`), as the 16 bits above the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// `RDMA_PS_IPOIB`.
    Ipoib,
    /// `RDMA_PS_TCP`: RC (and UC) connections.
    Tcp,
    /// `RDMA_PS_UDP`: UD, resolved with SIDR.
    Udp,
    /// `RDMA_PS_IB`: any QP type.
    Ib,
}

impl PortSpace {
    /// The value librdmacm gives it (`RDMA_PS_*`).
    pub const fn value(self) -> u16 {
        match self {
            PortSpace::Ipoib => 0x0002,
            PortSpace::Tcp => 0x0106,
            PortSpace::Udp => 0x0111,
            PortSpace::Ib => 0x013f,
        }
    }

    /// The port space of value `v` (`RDMA_PS_*`), if it is one.
    pub const fn from_value(v: u16) -> Option<PortSpace> {
        Some(match v {
            0x0002 => PortSpace::Ipoib,
            0x0106 => PortSpace::Tcp,
            0x0111 => PortSpace::Udp,
            0x013f => PortSpace::Ib,
            _ => return None,
        })
    }

    /// The Service ID of `port` in this port space.
    pub const fn service_id(self, port: u16) -> u64 {
        (self.value() as u64) << 16 | port as u64
    }

    /// The port space and port of an IP CM Service ID, if it is one.
    pub const fn split(service_id: u64) -> Option<(PortSpace, u16)> {
        if service_id >> 32 != 0 {
            return None;
        }
        match PortSpace::from_value((service_id >> 16) as u16) {
            Some(ps) => Some((ps, service_id as u16)),
            None => None,
        }
    }
}

/// The private data header: who connects to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    /// The active side's port.
    pub src_port: u16,
    /// The active side's address.
    pub src: IpAddr,
    /// The address the active side connects to (the listener's).
    pub dst: IpAddr,
}

impl IpHeader {
    /// Reads the header at the start of `private_data`.
    ///
    /// # Errors
    /// [`Error::Truncated`] below 36 bytes; [`Error::BadField`] for a version other than 0, an
    /// IP version other than 4 or 6, or source and destination of different families (A11.3
    /// makes them one IP version).
    pub fn parse(private_data: &[u8]) -> Result<IpHeader> {
        let b = private_data.get(..HEADER_LEN).ok_or(Error::Truncated {
            what: "CM IP header",
            need: HEADER_LEN,
            have: private_data.len(),
        })?;
        if b[0] != 0 {
            return Err(Error::BadField {
                what: "CM IP header version",
                value: b[0].into(),
            });
        }
        let addr = |at: usize| -> Option<IpAddr> {
            let a: [u8; 16] = b[at..at + 16].try_into().expect("16 bytes");
            match b[1] >> 4 {
                4 => Some(IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15]))),
                6 => Some(IpAddr::V6(Ipv6Addr::from(a))),
                _ => None,
            }
        };
        let (Some(src), Some(dst)) = (addr(4), addr(20)) else {
            return Err(Error::BadField {
                what: "CM IP header IP version",
                value: (b[1] >> 4).into(),
            });
        };
        Ok(IpHeader {
            src_port: u16::from_be_bytes([b[2], b[3]]),
            src,
            dst,
        })
    }

    /// Writes the header into the first 36 bytes of `private_data`.
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] below 36 bytes; [`Error::BadField`] if source and destination
    /// are of different families.
    pub fn emit(&self, private_data: &mut [u8]) -> Result<()> {
        let have = private_data.len();
        let b = private_data
            .get_mut(..HEADER_LEN)
            .ok_or(Error::BufferTooSmall {
                need: HEADER_LEN,
                have,
            })?;
        let version = match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => {
                return Err(Error::BadField {
                    what: "CM IP header: mixed address families",
                    value: 0,
                })
            }
        };
        b.fill(0);
        b[1] = version << 4;
        b[2..4].copy_from_slice(&self.src_port.to_be_bytes());
        for (at, a) in [(4, self.src), (20, self.dst)] {
            match a {
                IpAddr::V4(v4) => b[at + 12..at + 16].copy_from_slice(&v4.octets()),
                IpAddr::V6(v6) => b[at..at + 16].copy_from_slice(&v6.octets()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::capture_data;
    use crate::cm::{req, ReqRepr};

    /// The REQ of the capture: rping from 10.99.0.3 to port 7174 of 10.99.0.2.
    #[test]
    fn test_capture_req() {
        let data = capture_data(1);
        let r = ReqRepr::parse(&req::Packet::new_checked(&data[..]).unwrap()).unwrap();
        assert_eq!(PortSpace::split(r.service_id), Some((PortSpace::Tcp, 7174)));
        let h = IpHeader::parse(&r.private_data).unwrap();
        assert_eq!(h.src, IpAddr::V4(Ipv4Addr::new(10, 99, 0, 3)));
        assert_eq!(h.dst, IpAddr::V4(Ipv4Addr::new(10, 99, 0, 2)));
        let mut out = [0xa5u8; HEADER_LEN];
        h.emit(&mut out).unwrap();
        assert_eq!(out[..], r.private_data[..HEADER_LEN]);
    }

    #[test]
    fn test_ipv6_roundtrip() {
        let h = IpHeader {
            src_port: 0xbeef,
            src: "fe80::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
        };
        let mut b = [0u8; 56];
        h.emit(&mut b).unwrap();
        assert_eq!(b[1], 0x60);
        assert_eq!(IpHeader::parse(&b), Ok(h));
    }

    #[test]
    fn test_bad_headers() {
        let mut b = [0u8; HEADER_LEN];
        assert!(matches!(
            IpHeader::parse(&b),
            Err(Error::BadField {
                what: "CM IP header IP version",
                value: 0
            })
        ));
        b[0] = 1;
        assert!(matches!(
            IpHeader::parse(&b),
            Err(Error::BadField { value: 1, .. })
        ));
        assert!(matches!(
            IpHeader::parse(&b[..35]),
            Err(Error::Truncated {
                need: 36,
                have: 35,
                ..
            })
        ));
        let mixed = IpHeader {
            src_port: 1,
            src: "10.0.0.1".parse().unwrap(),
            dst: "::1".parse().unwrap(),
        };
        assert!(mixed.emit(&mut b).is_err());
        assert!(matches!(
            mixed.emit(&mut b[..10]),
            Err(Error::BufferTooSmall { need: 36, have: 10 })
        ));
    }

    #[test]
    fn test_service_ids() {
        assert_eq!(PortSpace::Tcp.service_id(7174), 0x0106_1c06);
        assert_eq!(PortSpace::Udp.service_id(1), 0x0111_0001);
        assert_eq!(PortSpace::split(0x013f_0002), Some((PortSpace::Ib, 2)));
        assert_eq!(PortSpace::split(0x0107_0002), None);
        assert_eq!(PortSpace::split(0x1_0106_0002), None);
    }
}
