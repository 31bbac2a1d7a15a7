//! Shorthands for building work requests against the harness's regions.

use softrnic_provider::wc::{WcStatus, WorkCompletion};
use softrnic_provider::wr::{RecvWr, RemoteAddr, SendFlags, SendOpcode, SendWr, Sge};

use super::Region;

/// A signaled send WR.
pub fn send_wr(wr_id: u64, opcode: SendOpcode, sg_list: Vec<Sge>, remote: RemoteAddr) -> SendWr {
    SendWr {
        flags: SendFlags::SIGNALED,
        remote,
        ..SendWr::new(wr_id, opcode, sg_list)
    }
}

/// `length` bytes of `r` from `offset`.
pub fn sge_of(r: &Region, offset: u64, length: u32) -> Sge {
    Sge {
        addr: r.addr() + offset,
        length,
        lkey: r.keys.lkey,
    }
}

/// `r` from `offset`, as a remote address.
pub fn remote_of(r: &Region, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: r.addr() + offset,
        rkey: r.keys.rkey,
    }
}

/// A receive WR.
pub fn recv_wr(wr_id: u64, sg_list: Vec<Sge>) -> RecvWr {
    RecvWr { wr_id, sg_list }
}

/// `len` bytes, none zero, that differ with `seed`.
pub fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// (wr_id, status) of each completion, in order.
pub fn wc_statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}
