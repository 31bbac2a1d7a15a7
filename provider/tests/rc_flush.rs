//! IBTA 1.5 FLUSH and ATOMIC WRITE end to end over the in-memory fabric: both placement types
//! with and without the region's rights, ATOMIC WRITE's 8 bytes, alignment, bounds and rights,
//! duplicates answered without re-executing, and a persistence FLUSH of a file-backed region.
//!
//! B owns the memory: a 4 KiB region `mem`, and `eyes`, a second region over the same bytes
//! that only the test reads through, so that memory is checked against a shadow copy after
//! every failed access.

mod common;

use common::wrs::{bytes, send_wr, sge_of, wc_statuses};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp::QpAttr;
use softrnic_provider::qp_state::QpState;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::{WcOpcode, WcStatus};
use softrnic_provider::wr::{RemoteAddr, SendOpcode, SendWr};
use softrnic_wire::Opcode;

const PAGE: usize = 4096;
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
/// FETH low byte: placement type global visibility / persistence, selectivity level 1.
const GLOBAL: u32 = 1;
const PERSIST: u32 = 2;
const WHOLE_REGION: u32 = 1 << 4;

struct Setup {
    p: Pair,
    eyes: Region,
    shadow: Vec<u8>,
    local: Region,
}

/// B's `mem` has `access`; returns the setup and `mem`'s R_Key and address.
fn setup(access: Access) -> (Setup, RemoteAddr) {
    let mut p = Pair::new(FabricConfig::default(), 7, Connect::default());
    let Target { mem, eyes, shadow } = p.b.target(PAGE, access, 0x41);
    let local = p.a.region(PAGE, RW);
    let remote = RemoteAddr {
        addr: mem.addr(),
        rkey: mem.keys.rkey,
    };
    (
        Setup {
            p,
            eyes,
            shadow,
            local,
        },
        remote,
    )
}

fn flush_wr(wr_id: u64, remote: RemoteAddr, len: u64, feth: u32) -> SendWr {
    SendWr {
        imm_data_or_inv_rkey: feth,
        compare_add: len,
        ..send_wr(wr_id, SendOpcode::Flush, vec![], remote)
    }
}

/// An ATOMIC WRITE of `value` (staged in A's local buffer at offset 0).
fn atomic_write_wr(s: &mut Setup, wr_id: u64, remote: RemoteAddr, value: u64) -> SendWr {
    s.p.a.fill(&s.local, 0, &value.to_ne_bytes());
    send_wr(
        wr_id,
        SendOpcode::AtomicWrite,
        vec![sge_of(&s.local, 0, 8)],
        remote,
    )
}

/// Posts `wr` on A and runs until it completes; returns its status.
fn run(s: &mut Setup, wr: &SendWr) -> WcStatus {
    s.p.a.send_wcs.clear();
    s.p.a.qp.post_send(wr, &s.p.a.mrs).unwrap();
    s.p.run_until(100_000, |p| !p.a.send_wcs.is_empty());
    let wc = s.p.a.send_wcs.pop().expect("a completion");
    if wc.status == WcStatus::Success {
        let op = match wr.opcode {
            SendOpcode::Flush => WcOpcode::Flush,
            _ => WcOpcode::AtomicWrite,
        };
        assert_eq!(wc.opcode, op);
    }
    wc.status
}

fn untouched(s: &Setup) {
    assert!(s.p.b.read(&s.eyes, 0, PAGE) == s.shadow, "memory changed");
}

fn at(r: RemoteAddr, off: u64) -> RemoteAddr {
    RemoteAddr {
        addr: r.addr + off,
        ..r
    }
}

#[test]
fn flush_global_visibility_needs_flush_global_and_answers_with_an_empty_read_response() {
    for (access, want) in [
        (RW | Access::FLUSH_GLOBAL, WcStatus::Success),
        (RW, WcStatus::RemAccessErr),
    ] {
        for feth in [GLOBAL, GLOBAL | WHOLE_REGION] {
            let (mut s, mem) = setup(access);
            assert_eq!(run(&mut s, &flush_wr(1, at(mem, 64), 128, feth)), want);
            untouched(&s);
            let answers: Vec<_> = s.p.a.seen_of(Opcode::RC_RDMA_READ_RESPONSE_ONLY).collect();
            if want == WcStatus::Success {
                assert_eq!(answers.len(), 1);
                assert_eq!(answers[0].payload_len, 0);
            } else {
                assert!(answers.is_empty());
            }
        }
    }
}

#[test]
fn flush_persistence_of_anonymous_memory_is_rem_access_err() {
    // Anonymous memory cannot carry FLUSH_PERSISTENT, so a persistence FLUSH (alone or with
    // global visibility) finds the right missing.
    for feth in [PERSIST, PERSIST | GLOBAL, PERSIST | WHOLE_REGION] {
        let (mut s, mem) = setup(RW | Access::FLUSH_GLOBAL);
        assert_eq!(
            run(&mut s, &flush_wr(1, mem, 64, feth)),
            WcStatus::RemAccessErr
        );
        untouched(&s);
    }
}

#[test]
fn flush_out_of_bounds_is_rem_access_err() {
    let (mut s, mem) = setup(RW | Access::FLUSH_GLOBAL);
    let wr = flush_wr(1, at(mem, PAGE as u64 - 8), 16, GLOBAL);
    assert_eq!(run(&mut s, &wr), WcStatus::RemAccessErr);
}

#[test]
fn flush_on_a_qp_without_the_flush_access_flag_is_an_invalid_request() {
    let (mut s, mem) = setup(RW | Access::FLUSH_GLOBAL);
    let attr = QpAttr {
        qp_state: QpState::Rts,
        qp_access_flags: RW,
        ..QpAttr::default()
    };
    use softrnic_provider::qp_state::AttrMask;
    s.p.b
        .qp
        .modify(&attr, AttrMask::STATE | AttrMask::ACCESS_FLAGS, &LIMITS)
        .unwrap();
    assert_eq!(
        run(&mut s, &flush_wr(1, mem, 64, GLOBAL)),
        WcStatus::RemInvReqErr
    );
}

#[test]
fn bad_flush_work_requests_are_einval() {
    let (mut s, mem) = setup(RW | Access::FLUSH_GLOBAL);
    for feth in [0, 4, 8, 2 << 4, 1 << 6 | GLOBAL] {
        assert!(s
            .p
            .a
            .qp
            .post_send(&flush_wr(1, mem, 8, feth), &s.p.a.mrs)
            .is_err());
    }
    let with_buffer = SendWr {
        sg_list: vec![sge_of(&s.local, 0, 8)],
        ..flush_wr(1, mem, 8, GLOBAL)
    };
    assert!(s.p.a.qp.post_send(&with_buffer, &s.p.a.mrs).is_err());
    let short = SendWr {
        sg_list: vec![sge_of(&s.local, 0, 4)],
        ..atomic_write_wr(&mut s, 2, mem, 0)
    };
    assert!(s.p.a.qp.post_send(&short, &s.p.a.mrs).is_err());
}

#[test]
fn atomic_write_stores_exactly_eight_bytes() {
    let (mut s, mem) = setup(RW);
    let v = 0x0123_4567_89ab_cdefu64;
    let wr = atomic_write_wr(&mut s, 1, at(mem, 16), v);
    assert_eq!(run(&mut s, &wr), WcStatus::Success);
    s.shadow[16..24].copy_from_slice(&v.to_ne_bytes());
    untouched(&s);
    let answer = s.p.a.seen_of(Opcode::RC_RDMA_READ_RESPONSE_ONLY).next();
    assert_eq!(answer.map(|a| a.payload_len), Some(0));
}

#[test]
fn atomic_write_misaligned_out_of_bounds_or_without_the_right_touches_nothing() {
    let cases = [
        (RW, 12, WcStatus::RemInvReqErr), // misaligned: Invalid Request, as rxe
        (RW, PAGE as u64, WcStatus::RemAccessErr),
        (RW, PAGE as u64 - 4, WcStatus::RemAccessErr),
        (
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            0,
            WcStatus::RemAccessErr,
        ),
    ];
    for (access, off, want) in cases {
        let (mut s, mem) = setup(access);
        let wr = atomic_write_wr(&mut s, 1, at(mem, off), u64::MAX);
        assert_eq!(run(&mut s, &wr), want, "offset {off}, {access:?}");
        untouched(&s);
    }
}

#[test]
fn wrong_rkey_for_atomic_write_and_flush_is_rem_access_err() {
    let (mut s, mem) = setup(RW | Access::FLUSH_GLOBAL);
    let bad = RemoteAddr {
        rkey: mem.rkey ^ 1,
        ..mem
    };
    let wr = atomic_write_wr(&mut s, 1, bad, 7);
    assert_eq!(run(&mut s, &wr), WcStatus::RemAccessErr);
    untouched(&s);
    let (mut s, _) = setup(RW | Access::FLUSH_GLOBAL);
    assert_eq!(
        run(&mut s, &flush_wr(1, bad, 8, GLOBAL)),
        WcStatus::RemAccessErr
    );
}

/// Drops the first packet with `opcode` that reaches the node.
fn drop_first(n: &mut Node, opcode: Opcode) {
    let mut dropped = false;
    n.drop_if = Some(Box::new(move |pkt| {
        if pkt.repr.bth.opcode != opcode || dropped {
            return false;
        }
        dropped = true;
        true
    }));
}

#[test]
fn a_replayed_atomic_write_is_answered_but_does_not_overwrite_a_later_write() {
    let (mut s, mem) = setup(RW);
    // The ATOMIC WRITE's answer is lost; the WRITE behind it lands, and its ACK tells A the
    // answer is missing: A resends the ATOMIC WRITE, which B must not execute again.
    drop_first(&mut s.p.a, Opcode::RC_RDMA_READ_RESPONSE_ONLY);
    let aw = atomic_write_wr(&mut s, 1, mem, 0x1111_1111_1111_1111);
    s.p.a.qp.post_send(&aw, &s.p.a.mrs).unwrap();
    let later = 0x2222_2222_2222_2222u64.to_ne_bytes();
    s.p.a.fill(&s.local, 64, &later);
    let write = send_wr(2, SendOpcode::RdmaWrite, vec![sge_of(&s.local, 64, 8)], mem);
    s.p.a.qp.post_send(&write, &s.p.a.mrs).unwrap();
    s.p.run_until(100_000, |p| p.a.send_wcs.len() == 2);
    assert_eq!(
        wc_statuses(&s.p.a.send_wcs),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert!(
        s.p.b.seen_of(Opcode::RC_ATOMIC_WRITE).count() >= 2,
        "a duplicate came"
    );
    s.shadow[..8].copy_from_slice(&later);
    untouched(&s);
}

#[test]
fn a_duplicate_flush_is_answered_again() {
    let (mut s, mem) = setup(RW | Access::FLUSH_GLOBAL);
    drop_first(&mut s.p.a, Opcode::RC_RDMA_READ_RESPONSE_ONLY);
    assert_eq!(
        run(&mut s, &flush_wr(1, mem, 64, GLOBAL)),
        WcStatus::Success
    );
    assert_eq!(s.p.b.seen_of(Opcode::RC_FLUSH).count(), 2);
    assert_eq!(s.p.a.seen_of(Opcode::RC_RDMA_READ_RESPONSE_ONLY).count(), 2);
}

/// A shared mapping of a fresh file of `len` bytes.
struct Mapped {
    path: std::path::PathBuf,
    ptr: *mut u8,
    len: usize,
}

impl Mapped {
    fn new(name: &str, len: usize) -> Mapped {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("softrnic-{name}-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.set_len(len as u64).unwrap();
        // SAFETY: a fresh shared mapping of the whole file, unmapped in drop.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Mapped {
            path,
            ptr: ptr.cast(),
            len,
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: our mapping; the region over it was deregistered (the node is gone).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn write_then_persistence_flush_of_a_file_backed_region_reaches_the_file() {
    let file = Mapped::new("flush-provider", PAGE);
    let mut p = Pair::new(FabricConfig::default(), 9, Connect::default());
    let access = RW | Access::FLUSH_PERSISTENT | Access::FLUSH_GLOBAL;
    // SAFETY: the mapping outlives the pair (dropped after it, below).
    let keys = unsafe {
        p.b.mrs
            .register_file(PD, file.ptr, PAGE, file.ptr as u64, access)
            .unwrap()
    };
    let local = p.a.region(PAGE, RW);
    let data = bytes(300, 0x5a);
    p.a.fill(&local, 0, &data);
    let mem = RemoteAddr {
        addr: file.ptr as u64 + 100,
        rkey: keys.rkey,
    };
    let write = send_wr(1, SendOpcode::RdmaWrite, vec![sge_of(&local, 0, 300)], mem);
    p.a.qp.post_send(&write, &p.a.mrs).unwrap();
    for (wr_id, feth) in [(2, PERSIST), (3, PERSIST | GLOBAL | WHOLE_REGION)] {
        p.a.qp
            .post_send(&flush_wr(wr_id, mem, 300, feth), &p.a.mrs)
            .unwrap();
    }
    p.run_until(100_000, |p| p.a.send_wcs.len() == 3);
    assert_eq!(
        wc_statuses(&p.a.send_wcs),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    let on_disk = std::fs::read(&file.path).unwrap();
    assert_eq!(&on_disk[100..400], &data[..]);
    drop(p);
    drop(file);
}

#[test]
fn only_file_backed_regions_take_flush_persistent() {
    let file = Mapped::new("flush-rights", PAGE);
    let p = Pair::new(FabricConfig::default(), 9, Connect::default());
    let mut buf = vec![0u8; 64];
    // SAFETY: `buf` outlives the registration attempt, which fails.
    let anon = unsafe {
        p.b.mrs
            .register(PD, buf.as_mut_ptr(), 64, 0, Access::FLUSH_PERSISTENT)
    };
    assert!(anon.is_err());
    // SAFETY: the mapping outlives the pair.
    let keys = unsafe {
        p.b.mrs
            .register_file(PD, file.ptr, PAGE, 0, Access::FLUSH_PERSISTENT)
    };
    assert!(keys.is_ok());
    drop(p);
}
