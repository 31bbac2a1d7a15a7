//! Offsets and lengths a program passes to a `MemoryRegion` are checked without overflow:
//! `EINVAL` for every range that leaves the region or overflows, never a panic.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::Access;

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

fn side() -> common::Side {
    let fabric = Fabric::new(FabricConfig::default(), 94);
    common::Setup::default().on(&fabric, IpAddr::V4(Ipv4Addr::new(10, 94, 0, 1)))
}

#[test]
fn offsets_and_lengths_that_overflow_are_einval() {
    let s = side();
    for len in [usize::MAX, usize::MAX - 100, isize::MAX as usize + 1] {
        let e = s.pd.reg_mr(len, RW).err().map(|e| e.errno());
        assert_eq!(e, Some(libc::EINVAL), "reg_mr({len:#x})");
    }
    let mr = s.pd.reg_mr(4096, RW).unwrap();
    let mut one = [0u8; 1];
    for offset in [usize::MAX, usize::MAX - 1, 4096, 1 << 63] {
        assert_eq!(mr.read(offset, &mut one).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(mr.write(offset, b"abc").unwrap_err().errno(), libc::EINVAL);
    }
    // In range, at both ends.
    mr.write(4093, b"abc").unwrap();
    mr.read(4095, &mut one).unwrap();
    assert_eq!(one, *b"c");
}

#[test]
fn try_sge_checks_and_sge_never_panics() {
    let s = side();
    let mr = s.pd.reg_mr(4096, RW).unwrap();
    let sge = mr.try_sge(4000, 96).unwrap();
    assert_eq!(
        (sge.addr, sge.length, sge.lkey),
        (mr.addr() + 4000, 96, mr.lkey())
    );
    for (offset, len) in [(4000, 97), (usize::MAX, 1), (usize::MAX - 3, 8), (4097, 0)] {
        let e = mr.try_sge(offset, len).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{offset:#x} {len}");
    }
    // Unchecked, as an ibv_sge: an address that overflows gets a key no region has.
    let wild = mr.sge(usize::MAX, 1);
    assert_eq!(wild.lkey, 0);
    let s2 = mr.sge(8192, 1);
    assert_eq!((s2.addr, s2.lkey), (mr.addr() + 8192, mr.lkey()));
}
