//! Device memory through the safe API, on one device over kernel UDP (127.0.62.11): the
//! budget of `MAX_DM_SIZE` bytes (`ENOMEM` past it, given back when a DM is dropped), copies
//! with mlx5's checks, zero-based regions over part of a DM (local access from 0, zero
//! length allowed, bounds), and `free` refused (`EBUSY`) while a region covers the DM.

use std::net::{IpAddr, Ipv4Addr};

use softrnic_uapi::{Access, Context, OpenOptions, MAX_DM_SIZE};

const RW: Access = Access::LOCAL_WRITE.union(Access::ZERO_BASED);

/// The device on 127.0.62.11, or `None` (the test `test` skipping) if it cannot be opened.
fn open(test: &str) -> Option<Context> {
    let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 62, 11));
    match Context::open(addr, OpenOptions::default()) {
        Ok(c) => Some(c),
        Err(e) => {
            softrnic_testkit::skip(test, &format!("cannot open a UDP device on {addr}: {e}"));
            None
        }
    }
}

#[test]
fn device_memory_budget_copies_and_regions() {
    let Some(ctx) = open("device_memory_budget_copies_and_regions") else {
        return;
    };
    let errno = |r: softrnic_uapi::Error| r.errno();

    // The budget.
    assert_eq!(errno(ctx.alloc_dm(0, 0).err().unwrap()), libc::EINVAL);
    assert_eq!(errno(ctx.alloc_dm(64, 13).err().unwrap()), libc::EINVAL);
    assert_eq!(
        errno(ctx.alloc_dm(MAX_DM_SIZE + 1, 0).err().unwrap()),
        libc::ENOMEM
    );
    let big = ctx.alloc_dm(MAX_DM_SIZE - 4096, 0).unwrap();
    let dm = ctx.alloc_dm(4096, 6).unwrap();
    assert_eq!(errno(ctx.alloc_dm(4, 0).err().unwrap()), libc::ENOMEM);
    drop(big);
    drop(ctx.alloc_dm(MAX_DM_SIZE - 4096, 0).unwrap());

    // Copies: zeroed at first, bounds before alignment, 4-byte words.
    let mut out = [0xffu8; 8];
    dm.copy_from(4088, &mut out).unwrap();
    assert_eq!(out, [0; 8]);
    assert_eq!(errno(dm.copy_to(4092, &[1; 8]).unwrap_err()), libc::EFAULT);
    assert_eq!(
        errno(dm.copy_to(u64::MAX - 3, &[1; 4]).unwrap_err()),
        libc::EFAULT
    );
    assert_eq!(errno(dm.copy_to(2, &[1; 4]).unwrap_err()), libc::EINVAL);
    assert_eq!(
        errno(dm.copy_from(0, &mut out[..6]).unwrap_err()),
        libc::EINVAL
    );
    assert_eq!(
        errno(dm.copy_to(512, b"zero-based").unwrap_err()),
        libc::EINVAL
    );
    dm.copy_to(512, b"zero-based!!").unwrap();

    // Regions: addressed from 0 at their DM offset; zero length allowed; bounds.
    let pd = ctx.alloc_pd();
    assert_eq!(
        errno(pd.reg_dm_mr(&dm, 0, 16, Access::LOCAL_WRITE).err().unwrap()),
        libc::EINVAL
    );
    assert_eq!(
        errno(pd.reg_dm_mr(&dm, 4092, 8, RW).err().unwrap()),
        libc::EINVAL
    );
    let empty = pd.reg_dm_mr(&dm, 4096, 0, RW).unwrap();
    let mr = pd.reg_dm_mr(&dm, 512, 64, RW).unwrap();
    assert_eq!(mr.sge(0, 4).addr, 0);
    let mut got = [0u8; 12];
    mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"zero-based!!");
    mr.write(60, b"end!").unwrap();
    assert!(mr.write(61, b"end!").is_err());
    dm.copy_from(572, &mut out[..4]).unwrap();
    assert_eq!(&out[..4], b"end!");

    // Busy while a region covers it; free once none does.
    let (dm, e) = dm.free().err().unwrap();
    assert_eq!(e.errno(), libc::EBUSY);
    drop(mr);
    let (dm, _) = dm.free().err().unwrap();
    drop(empty);
    dm.free().map_err(|(_, e)| e).unwrap();
}
