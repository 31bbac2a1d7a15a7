//! Memory-region descriptors: the network-transferable description of a local region that a
//! peer turns into a [`RemoteMr`], byte for byte compatible with librpma's
//! (`rpma_mr_get_descriptor`, `rpma_mr_remote_from_descriptor`):
//!
//! | bytes  | field                    |
//! |--------|--------------------------|
//! | 0..8   | address, u64 little-endian |
//! | 8..16  | length, u64 little-endian  |
//! | 16..20 | R_Key, u32 little-endian   |
//! | 20     | usage, the [`Usage`] bits  |
//!
//! Parsing follows librpma's error semantics: no buffer or a buffer shorter than
//! [`DESCRIPTOR_LEN`] is [`DescriptorError::Inval`] (librpma reads the first 21 bytes of a longer
//! one, so that descriptors can sit in a larger private-data buffer; so does this); content
//! that is not a memory region — no usage bit, zero length, a range past the end of the address
//! space — is [`DescriptorError::NoSupp`]. A [`RemoteMr`] is a plain value here, so parsing
//! never allocates; [`DescriptorError::NoMem`] is for the C ABI, which allocates the remote
//! region it returns.
//!
//! Read librpma's security warning too: a descriptor received over an unprotected channel can
//! be forged to point at another region the same R_Key reaches. The R_Key and the remote
//! side's bounds checks still hold: nothing outside a region registered with the right access
//! is ever touched.

use std::fmt;

use crate::{Access, MemoryRegion, RemoteAddr};

/// Length of a descriptor (`RPMA_MR_DESC_SIZE`).
pub const DESCRIPTOR_LEN: usize = 21;

bitflags::bitflags! {
    /// librpma's `RPMA_MR_USAGE_*` bits: what a region may be used for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Usage: u8 {
        /// The source of a remote RDMA READ (the peer reads it).
        const READ_SRC = 1 << 0;
        /// The destination of a local RDMA READ.
        const READ_DST = 1 << 1;
        /// The source of a local RDMA WRITE.
        const WRITE_SRC = 1 << 2;
        /// The destination of a remote RDMA WRITE (the peer writes it).
        const WRITE_DST = 1 << 3;
        /// A flush to global visibility may target it.
        const FLUSH_TYPE_VISIBILITY = 1 << 4;
        /// A flush to persistence may target it.
        const FLUSH_TYPE_PERSISTENT = 1 << 5;
        /// The source of a SEND.
        const SEND = 1 << 6;
        /// The destination of a receive.
        const RECV = 1 << 7;
    }
}

impl Usage {
    /// What a region registered with `access` may be used for. Local reads (WRITE_SRC,
    /// SEND) are always allowed; the flush usages follow `FLUSH_GLOBAL` / `FLUSH_PERSISTENT`.
    pub fn of_access(access: Access) -> Usage {
        let mut u = Usage::WRITE_SRC | Usage::SEND;
        if access.contains(Access::LOCAL_WRITE) {
            u |= Usage::READ_DST | Usage::RECV;
        }
        if access.contains(Access::REMOTE_READ) {
            u |= Usage::READ_SRC;
        }
        if access.contains(Access::REMOTE_WRITE) {
            u |= Usage::WRITE_DST;
        }
        if access.contains(Access::FLUSH_GLOBAL) {
            u |= Usage::FLUSH_TYPE_VISIBILITY;
        }
        if access.contains(Access::FLUSH_PERSISTENT) {
            u |= Usage::FLUSH_TYPE_PERSISTENT;
        }
        u
    }
}

/// Why a descriptor was refused, as librpma says it (`RPMA_E_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescriptorError {
    /// `RPMA_E_INVAL`: no buffer, or one of the wrong size.
    Inval(&'static str),
    /// `RPMA_E_NOSUPP`: the content does not describe a memory region.
    NoSupp(&'static str),
    /// `RPMA_E_NOMEM`: no memory for the remote region (C ABI only).
    NoMem,
}

impl DescriptorError {
    /// librpma's code for it.
    pub fn rpma_code(self) -> i32 {
        match self {
            DescriptorError::NoSupp(_) => -100_001,
            DescriptorError::NoMem => -100_003,
            DescriptorError::Inval(_) => -100_004,
        }
    }
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescriptorError::Inval(why) => write!(f, "invalid argument: {why}"),
            DescriptorError::NoSupp(why) => write!(f, "not a memory region: {why}"),
            DescriptorError::NoMem => f.write_str("out of memory"),
        }
    }
}

impl std::error::Error for DescriptorError {}

impl MemoryRegion {
    /// What the region may be used for, from its access flags.
    pub fn usage(&self) -> Usage {
        Usage::of_access(self.access())
    }

    /// The region's descriptor (`rpma_mr_get_descriptor`), to send to a peer.
    pub fn descriptor(&self) -> [u8; DESCRIPTOR_LEN] {
        encode(self.addr(), self.len() as u64, self.rkey(), self.usage())
    }
}

fn encode(addr: u64, len: u64, rkey: u32, usage: Usage) -> [u8; DESCRIPTOR_LEN] {
    let mut d = [0u8; DESCRIPTOR_LEN];
    d[0..8].copy_from_slice(&addr.to_le_bytes());
    d[8..16].copy_from_slice(&len.to_le_bytes());
    d[16..20].copy_from_slice(&rkey.to_le_bytes());
    d[20] = usage.bits();
    d
}

/// A peer's memory region, as its descriptor tells (`struct rpma_mr_remote`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteMr {
    /// Its first address (in the peer's address space).
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The R_Key to reach it with.
    pub rkey: u32,
    /// What the peer allows it to be used for.
    pub usage: Usage,
}

impl RemoteMr {
    /// Parses a descriptor (`rpma_mr_remote_from_descriptor`); `None` is librpma's NULL.
    ///
    /// # Errors
    /// See the module comment: `Inval` for no buffer or one shorter than 21 bytes, `NoSupp`
    /// for content that is not a memory region.
    pub fn from_descriptor(desc: Option<&[u8]>) -> Result<RemoteMr, DescriptorError> {
        let d = desc.ok_or(DescriptorError::Inval("no descriptor"))?;
        let d: &[u8; DESCRIPTOR_LEN] = d
            .get(..DESCRIPTOR_LEN)
            .and_then(|d| d.try_into().ok())
            .ok_or(DescriptorError::Inval("a descriptor is 21 bytes"))?;
        let u64_at = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().expect("8 bytes"));
        let mr = RemoteMr {
            addr: u64_at(0),
            len: u64_at(8),
            rkey: u32::from_le_bytes(d[16..20].try_into().expect("4 bytes")),
            usage: Usage::from_bits_retain(d[20]),
        };
        if mr.usage.is_empty() {
            return Err(DescriptorError::NoSupp("no usage is set"));
        }
        if mr.len == 0 {
            return Err(DescriptorError::NoSupp("the length is 0"));
        }
        if mr.addr.checked_add(mr.len).is_none() {
            return Err(DescriptorError::NoSupp(
                "the region runs past the end of the address space",
            ));
        }
        Ok(mr)
    }

    /// The descriptor again.
    pub fn descriptor(&self) -> [u8; DESCRIPTOR_LEN] {
        encode(self.addr, self.len, self.rkey, self.usage)
    }

    /// Where a remote operation of `len` bytes at `offset` goes, for a use the peer allows:
    /// `Usage::WRITE_DST` for an RDMA WRITE, `Usage::READ_SRC` for an RDMA READ (atomics need
    /// both, as the responder reads and writes).
    ///
    /// # Errors
    /// `Inval` if the range leaves the region or the peer does not allow the use.
    pub fn at(&self, offset: u64, len: u64, needs: Usage) -> Result<RemoteAddr, DescriptorError> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(DescriptorError::Inval("the range leaves the remote region"));
        }
        if !self.usage.contains(needs) {
            return Err(DescriptorError::Inval(
                "the peer does not allow this use of the region",
            ));
        }
        Ok(RemoteAddr {
            addr: self.addr + offset,
            rkey: self.rkey,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_is_librpmas_21_bytes_little_endian() {
        let d = encode(
            0x0102_0304_0506_0708,
            0x1000,
            0xAABB_CCDD,
            Usage::from_bits_retain(0x49),
        );
        assert_eq!(
            d,
            [8, 7, 6, 5, 4, 3, 2, 1, 0, 0x10, 0, 0, 0, 0, 0, 0, 0xDD, 0xCC, 0xBB, 0xAA, 0x49]
        );
        let r = RemoteMr::from_descriptor(Some(&d)).unwrap();
        assert_eq!(
            (r.addr, r.len, r.rkey, r.usage),
            (
                0x0102_0304_0506_0708,
                0x1000,
                0xAABB_CCDD,
                Usage::from_bits_retain(0x49)
            )
        );
        assert_eq!(r.descriptor(), d);
    }

    #[test]
    fn missing_or_short_buffers_are_inval_and_longer_ones_are_read_as_librpma_does() {
        let d = encode(0x1000, 64, 0x1234, Usage::READ_SRC);
        let inval = |r: Result<RemoteMr, DescriptorError>| matches!(r, Err(e @ DescriptorError::Inval(_)) if e.rpma_code() == -100_004);
        assert!(inval(RemoteMr::from_descriptor(None)));
        assert!(inval(RemoteMr::from_descriptor(Some(&[]))));
        assert!(inval(RemoteMr::from_descriptor(Some(&d[..20]))));
        let mut long = d.to_vec();
        long.extend_from_slice(&[0xFF; 7]);
        assert_eq!(RemoteMr::from_descriptor(Some(&long)).unwrap().len, 64);
    }

    #[test]
    fn content_that_is_no_region_is_nosupp() {
        let nosupp = |d: [u8; DESCRIPTOR_LEN]| matches!(RemoteMr::from_descriptor(Some(&d)), Err(e @ DescriptorError::NoSupp(_)) if e.rpma_code() == -100_001);
        assert!(nosupp(encode(0x1000, 64, 1, Usage::empty())), "no usage");
        assert!(nosupp(encode(0x1000, 0, 1, Usage::READ_SRC)), "zero length");
        assert!(
            nosupp(encode(u64::MAX - 10, 64, 1, Usage::READ_SRC)),
            "wraps"
        );
        assert!(
            !nosupp(encode(u64::MAX - 64, 64, 1, Usage::READ_SRC)),
            "ends at the top"
        );
    }

    #[test]
    fn at_checks_the_range_and_the_usage() {
        let r = RemoteMr {
            addr: 0x10_000,
            len: 100,
            rkey: 7,
            usage: Usage::WRITE_DST,
        };
        let ok = r.at(90, 10, Usage::WRITE_DST).unwrap();
        assert_eq!((ok.addr, ok.rkey), (0x10_000 + 90, 7));
        assert!(r.at(91, 10, Usage::WRITE_DST).is_err(), "past the end");
        assert!(r.at(u64::MAX, 2, Usage::WRITE_DST).is_err(), "overflow");
        assert!(
            r.at(0, 10, Usage::READ_SRC).is_err(),
            "reading is not allowed"
        );
        assert!(r.at(100, 0, Usage::WRITE_DST).is_ok(), "empty at the end");
    }

    #[test]
    fn usage_follows_the_access_flags() {
        assert_eq!(
            Usage::of_access(Access::empty()),
            Usage::WRITE_SRC | Usage::SEND
        );
        let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let u = Usage::of_access(all);
        for bit in [
            Usage::READ_SRC,
            Usage::READ_DST,
            Usage::WRITE_SRC,
            Usage::WRITE_DST,
            Usage::SEND,
            Usage::RECV,
        ] {
            assert!(u.contains(bit));
        }
        assert!(!u.contains(Usage::FLUSH_TYPE_PERSISTENT));
        let u = Usage::of_access(all | Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT);
        assert!(u.contains(Usage::FLUSH_TYPE_VISIBILITY | Usage::FLUSH_TYPE_PERSISTENT));
    }
}
