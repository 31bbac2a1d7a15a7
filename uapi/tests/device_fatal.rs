//! A device whose progress panics (a bug in the engine) fails loudly: every context gets
//! `IBV_EVENT_DEVICE_FATAL`, every outstanding WR completes with `IBV_WC_WR_FLUSH_ERR`, a
//! later post completes the same way, and nothing hangs; its peer is not affected
//! (`driver/device.rs`, `guarded`). The panic is injected (`Device::inject_panic`).

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::{pair, signaled_send};
use softrnic_uapi::{Access, AsyncEvent, Element, EventType, QpState, RecvWr, WcStatus};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 63, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 63, 2));

#[test]
fn a_panic_in_progress_fails_the_device_with_device_fatal_and_flushed_wrs() {
    let (a, b) = pair(A, B, 63);
    let ma = a.pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    // Outstanding on A: a receive, and a SEND that B has no receive for (RNR, retried for
    // ever with rnr_retry 7).
    a.qp.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: vec![ma.sge(0, 64)],
    }])
    .unwrap();
    a.qp.post_send(&[signaled_send(2, ma.sge(64, 64))]).unwrap();

    a.ctx.device().inject_panic();
    let deadline = Instant::now() + Duration::from_secs(10);
    let event = loop {
        if let Some(e) = a.ctx.get_async_event() {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "no event: the failure went unreported"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(
        event,
        AsyncEvent {
            event_type: EventType::DeviceFatal,
            element: Element::Port(1),
        }
    );
    assert!(a.ctx.device().has_failed());
    let mut wcs: Vec<_> = (0..2)
        .map(|_| a.one())
        .map(|w| (w.wr_id, w.status))
        .collect();
    wcs.sort_by_key(|w| w.0);
    assert_eq!(
        wcs,
        [(1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)],
        "every outstanding WR flushed"
    );
    assert_eq!(a.qp.state(), QpState::Err);
    // A post afterwards completes at once, flushed.
    a.qp.post_send(&[signaled_send(3, ma.sge(0, 8))]).unwrap();
    let wc = a.one();
    assert_eq!((wc.wr_id, wc.status), (3, WcStatus::WrFlushErr));
    // The peer goes on as it was.
    assert!(!b.ctx.device().has_failed());
    assert_eq!(b.qp.state(), QpState::Rts);
    assert_eq!(b.ctx.get_async_event(), None);
}
