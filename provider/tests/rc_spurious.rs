//! Retransmit timeouts that were not losses (IBTA 9.7.6.1.3 leaves the timer's value to the
//! requester, within the QP's `timeout`): the early timer (`rc/requester/rto.rs`) fired while
//! the packets and their ACKs were still on their way, on a path slower than the timer's
//! first interval. The resend is one packet (a probe), and once an ACK shows the peer had
//! more than the probe, nothing that is still on its way is sent again.

mod common;

use std::time::Duration;

use common::wrs::{remote_of, send_wr, sge_of};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::qp_state::Mtu;
use softrnic_provider::rc::INITIAL_RTO;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::SendOpcode;

const MS: u64 = 1_000_000;
const MSG: usize = 16 * 4096;

#[test]
fn acks_that_come_after_an_early_timeout_stop_the_resend_at_the_probe() {
    // 15 ms each way, no round trip measured yet: the timer's first interval (10 ms) is
    // shorter than the round trip.
    let link = FabricConfig {
        delay_ns: 15 * MS,
        ..FabricConfig::default()
    };
    let c = Connect {
        mtu: Mtu::Mtu4096,
        ..Connect::default()
    };
    assert!(INITIAL_RTO < Duration::from_millis(30));
    let mut p = Pair::new(link, 3, c);
    let src = p.a.region(2 * MSG, Access::LOCAL_WRITE);
    let dst =
        p.b.region(2 * MSG, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let qpn = p.a.qp.qpn();
    let write = |i: u64| {
        send_wr(
            i,
            SendOpcode::RdmaWrite,
            vec![sge_of(&src, i * MSG as u64, MSG as u32)],
            remote_of(&dst, i * MSG as u64),
        )
    };
    // One 64 KiB WRITE at 0 ms, the next at 5 ms: the timer fires before the first ACK can
    // come back (30 ms), and resends the first packet alone. The ACK of the first WRITE
    // then reaches past that probe.
    p.a.post_send_on(qpn, &write(0)).unwrap();
    p.step();
    p.fabric.advance_to(5 * MS);
    p.a.post_send_on(qpn, &write(1)).unwrap();
    p.run_to_quiescence(10_000);
    let done: Vec<_> = p.a.send_wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(done, [(0, WcStatus::Success), (1, WcStatus::Success)]);
    let (ca, cb) = (p.a.qp.counters(), p.b.qp.counters());
    assert_eq!(ca.timeout_resends, 1, "{ca:?}");
    // 32 packets and the probe: the second WRITE, on its way when the first ACK came, was
    // not sent again.
    assert_eq!(ca.sent_pkts, 33, "{ca:?}");
    assert_eq!(cb.duplicate_request, 1, "{cb:?}");
    assert_eq!(ca.completer_retry_err, 0, "an early resend costs no retry");
}
