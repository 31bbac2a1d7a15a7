//! Tests of device memory regions: zero-based addressing, zero length, the rights allowed.

use super::*;

const PD: PdHandle = PdHandle(3);
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::ZERO_BASED);

/// Registers `buf[offset..offset + len]` as device memory.
fn reg(t: &MrTable, buf: &mut [u8], offset: usize, len: usize, access: Access) -> Result<MrKeys> {
    assert!(offset + len <= buf.len());
    // SAFETY: every test keeps its buffer alive until the table is dropped.
    unsafe { t.register_device_memory(PD, buf.as_mut_ptr().add(offset), len, access) }
}

/// Addresses start at 0 at the region's start (the DM offset), for local and remote access,
/// and nothing beyond the region is reachable.
#[test]
fn zero_based_from_the_offset() {
    let t = MrTable::new(4, 1).unwrap();
    let mut buf: Vec<u8> = (0..64).collect();
    let k = reg(&t, &mut buf, 16, 32, RW).unwrap();
    let first = t.with_local_read(k.lkey, PD, 0, 4, |b| b.to_vec()).unwrap();
    assert_eq!(first, [16, 17, 18, 19]);
    t.with_remote_write(k.rkey, PD, 7, 28, 4, |mut b| b.copy_from(&[0xee; 4]))
        .unwrap();
    assert!(t.with_local_read(k.lkey, PD, 29, 4, |_| ()).is_err());
    assert!(t.with_remote_read(k.rkey, PD, 7, 32, 1, |_| ()).is_err());
    t.deregister(k.lkey).unwrap();
    assert_eq!(buf[44..48], [0xee; 4]);
    assert_eq!(buf[48], 48);
}

/// A zero-length region registers (as the kernel allows for DM), even at the very end of the
/// allocation, and admits only zero-length accesses.
#[test]
fn zero_length_region() {
    let t = MrTable::new(4, 2).unwrap();
    let mut buf = vec![0u8; 8];
    let k = reg(&t, &mut buf, 8, 0, RW).unwrap();
    assert!(t.with_local_read(k.lkey, PD, 0, 0, |_| ()).is_ok());
    assert!(t.with_local_read(k.lkey, PD, 0, 1, |_| ()).is_err());
    t.deregister(k.lkey).unwrap();
}

/// ZERO_BASED is required; MW_BIND and flush rights are not allowed; remote write still
/// needs local write; optional bits are accepted.
#[test]
fn rights_allowed_on_device_memory() {
    let t = MrTable::new(8, 3).unwrap();
    let mut buf = vec![0u8; 16];
    let einval = |r: Result<MrKeys>| assert_eq!(r.unwrap_err().errno(), libc::EINVAL);
    einval(reg(&t, &mut buf, 0, 16, Access::LOCAL_WRITE));
    einval(reg(&t, &mut buf, 0, 16, RW | Access::MW_BIND));
    einval(reg(&t, &mut buf, 0, 16, RW | Access::FLUSH_GLOBAL));
    einval(reg(
        &t,
        &mut buf,
        0,
        16,
        Access::ZERO_BASED | Access::REMOTE_WRITE,
    ));
    let k = reg(&t, &mut buf, 0, 16, RW | Access::RELAXED_ORDERING).unwrap();
    t.deregister(k.lkey).unwrap();
}
