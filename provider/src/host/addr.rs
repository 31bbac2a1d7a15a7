//! An IP address in the fixed-size records the host's processes exchange (the agent's
//! [`super::cm_link`] records, the host-local path's slots in `transport/udp/local/`): a
//! family byte, 4 or 6, and 16 bytes, an IPv4 address in the first four.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `addr`'s family byte and bytes.
pub fn encode(addr: IpAddr) -> (u8, [u8; 16]) {
    let mut b = [0u8; 16];
    match addr {
        IpAddr::V4(a) => {
            b[..4].copy_from_slice(&a.octets());
            (4, b)
        }
        IpAddr::V6(a) => (6, a.octets()),
    }
}

/// The address of `family` in `b`; `None` for a family byte that is neither.
pub fn decode(family: u8, b: &[u8; 16]) -> Option<IpAddr> {
    match family {
        4 => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        6 => Some(IpAddr::V6(Ipv6Addr::from(*b))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_go_and_come_back_and_others_are_refused() {
        for a in ["10.1.2.3", "fe80::1:2"] {
            let a: IpAddr = a.parse().unwrap();
            let (f, b) = encode(a);
            assert_eq!(decode(f, &b), Some(a));
        }
        assert_eq!(decode(5, &[0; 16]), None);
    }
}
