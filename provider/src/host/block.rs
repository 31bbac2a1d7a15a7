//! QPN blocks: the range of QP numbers one process's device allocates from, unique across
//! the host for one address, and held as long as the process lives.
//!
//! IBTA 9.6.1.1 gives a QP a 24-bit number (DestQP in the BTH) that the receiving channel
//! adapter demultiplexes on. One device shared by many processes must therefore never give
//! two of them the same number: the 24-bit space is cut into [`BLOCKS`] blocks of
//! 2^[`BLOCK_BITS`] numbers, and each process using the device takes one. Block 0 holds QP0,
//! QP1 and the reserved numbers below [`crate::nic::FIRST_QPN`]; it belongs to the host's
//! agent, never to a process's QPs.
//!
//! A block is *leased* by binding a Unix socket to the abstract name
//! `softrnic/<address>/block/<n>`. The kernel gives a name to one socket at a time, and frees
//! it when its last holder exits, whatever the way (`kill -9` included): a crashed process's
//! block is free again once it is gone, and no file is ever left behind to clean up. The
//! socket is also the process's endpoint for questions about the device (`softrnic status`
//! connects to it).

use std::io;
use std::net::IpAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

/// Bits of a QPN that number the QPs inside a block.
pub const BLOCK_BITS: u32 = 14;

/// Blocks in the 24-bit QPN space.
pub const BLOCKS: u32 = 1 << (24 - BLOCK_BITS);

/// QPs one block holds (more than a device's `max_qp`, so numbers are not reused at once).
pub const BLOCK_SIZE: u32 = 1 << BLOCK_BITS;

/// A block of QP numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpnBlock(pub u16);

impl QpnBlock {
    /// The block QP `qpn` is in.
    pub fn of(qpn: u32) -> QpnBlock {
        QpnBlock(((qpn & 0x00ff_ffff) >> BLOCK_BITS) as u16)
    }

    /// Its first QPN.
    pub fn first(self) -> u32 {
        u32::from(self.0) << BLOCK_BITS
    }

    /// Its last QPN.
    pub fn last(self) -> u32 {
        self.first() + BLOCK_SIZE - 1
    }

    /// Whether `qpn` is in it.
    pub fn contains(self, qpn: u32) -> bool {
        QpnBlock::of(qpn) == self && qpn <= 0x00ff_ffff
    }
}

/// The abstract socket name of `block`'s lease on `addr`.
pub fn lease_name(addr: IpAddr, block: QpnBlock) -> String {
    format!("softrnic/{addr}/block/{}", block.0)
}

/// A leased block: held while this lives (and while the process does).
#[derive(Debug)]
pub struct Lease {
    block: QpnBlock,
    listener: UnixListener,
}

impl Lease {
    /// Leases the lowest free block of `addr` (1 and up: block 0 is the agent's).
    ///
    /// # Errors
    /// `AddrInUse` when every block is leased; the error of creating a socket.
    pub fn take(addr: IpAddr) -> io::Result<Lease> {
        (1..BLOCKS as u16)
            .find_map(|n| Lease::take_block(addr, QpnBlock(n)).ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "every QPN block of {addr} is in use ({} processes)",
                        BLOCKS - 1
                    ),
                )
            })
    }

    /// Leases `block` of `addr`.
    ///
    /// # Errors
    /// `AddrInUse` if another socket holds it.
    pub fn take_block(addr: IpAddr, block: QpnBlock) -> io::Result<Lease> {
        let name = SocketAddr::from_abstract_name(lease_name(addr, block))?;
        let listener = UnixListener::bind_addr(&name)?;
        Ok(Lease { block, listener })
    }

    /// The block.
    pub fn block(&self) -> QpnBlock {
        self.block
    }

    /// The socket holding the name, listening (for status questions).
    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }
}

/// The blocks of `addr` leased now, from `/proc/net/unix` (see [`super::status::devices`]),
/// in order.
///
/// # Errors
/// Reading `/proc/net/unix`.
pub fn leased_blocks(addr: IpAddr) -> io::Result<Vec<QpnBlock>> {
    Ok(super::status::devices()?
        .into_iter()
        .find(|(a, _)| *a == addr)
        .map(|(_, blocks)| blocks)
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 1));

    #[test]
    fn blocks_cover_the_24_bit_space() {
        assert_eq!(QpnBlock::of(0), QpnBlock(0));
        assert_eq!(QpnBlock::of(BLOCK_SIZE - 1), QpnBlock(0));
        assert_eq!(QpnBlock::of(BLOCK_SIZE), QpnBlock(1));
        assert_eq!(QpnBlock::of(0x00ff_ffff), QpnBlock((BLOCKS - 1) as u16));
        assert_eq!(QpnBlock(3).first(), 3 * BLOCK_SIZE);
        assert_eq!(QpnBlock(3).last(), 4 * BLOCK_SIZE - 1);
        assert!(QpnBlock(3).contains(3 * BLOCK_SIZE + 17));
        assert!(!QpnBlock(3).contains(4 * BLOCK_SIZE));
        assert!(!QpnBlock(0).contains(0x0100_0000), "beyond 24 bits");
    }

    #[test]
    fn leases_are_exclusive_listed_and_freed_on_drop() {
        let a = Lease::take(ADDR).unwrap();
        let b = Lease::take(ADDR).unwrap();
        assert_ne!(a.block(), b.block());
        assert!(a.block() >= QpnBlock(1), "block 0 is the agent's");
        let e = Lease::take_block(ADDR, a.block()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let listed = leased_blocks(ADDR).unwrap();
        assert!(
            listed.contains(&a.block()) && listed.contains(&b.block()),
            "{listed:?}"
        );
        let freed = a.block();
        drop(a);
        assert!(!leased_blocks(ADDR).unwrap().contains(&freed));
        let again = Lease::take_block(ADDR, freed).unwrap();
        assert_eq!(again.block(), freed);
    }
}
