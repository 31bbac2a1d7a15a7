//! `Cq::resize` (`ibv_resize_cq`) through the safe API: a CQ holding completions (receives
//! flushed by moving their QP to ERR) is resized larger and smaller and gives every one back,
//! in order; sizes below what it holds, 0 or above `max_cqe` are `EINVAL` and change nothing.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

mod common;

use common::Setup;
use softrnic_provider::transport::{Fabric, FabricConfig};
use softrnic_uapi::{AttrMask, Progress, QpAttr, QpState, RecvWr, WcStatus};

/// An in-memory fabric address (nobody else's).
const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 31, 1));
const EINVAL: i32 = 22;

#[test]
fn resizing_keeps_the_completions_in_order_and_checks_the_size() {
    let fabric = Fabric::new(FabricConfig::default(), 31);
    let setup = Setup {
        progress: Progress::Polling,
        seed: 31,
        cqe: 4,
        ..Setup::default()
    };
    let common::Side { ctx, cq, qp, .. } = setup.on(&fabric, A);
    let to = |qp_state| {
        let attr = QpAttr {
            qp_state,
            ..QpAttr::default()
        };
        let m = match qp_state {
            QpState::Init => {
                AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS
            }
            _ => AttrMask::STATE,
        };
        qp.modify(&attr, m).unwrap();
    };
    to(QpState::Init);
    let wrs: Vec<RecvWr> = (0..3)
        .map(|wr_id| RecvWr {
            wr_id,
            sg_list: vec![],
        })
        .collect();
    qp.post_recv(&wrs).unwrap();
    to(QpState::Err); // flushes the three receives into the CQ

    assert_eq!(cq.resize(8).unwrap(), 8, "larger");
    assert_eq!(cq.resize(3).unwrap(), 3, "smaller, down to what it holds");
    let max = ctx.query_device().max_cqe as usize;
    for cqe in [2, 0, max + 1] {
        assert_eq!(cq.resize(cqe).unwrap_err().errno(), EINVAL, "cqe {cqe}");
    }
    let wcs = cq.wait(3, Duration::from_secs(5)).unwrap();
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1, 2]);
    assert!(wcs.iter().all(|w| w.status == WcStatus::WrFlushErr));
    assert_eq!(cq.resize(1).unwrap(), 1, "empty again: any size from 1");
}
