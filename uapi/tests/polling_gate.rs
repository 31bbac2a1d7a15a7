//! Polling mode's short empty polls (`driver/device.rs`): a poll round that receives nothing
//! leaves the NIC alone unless the device is dirty or a timer is due, and a post that found
//! another thread's round holding the transport is still sent by that round.

mod common;

use std::io;
use std::net::IpAddr;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::{connect, side_on, signaled_send, Side};
use softrnic_provider::transport::{
    Fabric, FabricConfig, OutPacket, Ready, RecvBatch, Transport, TransportStats,
};
use softrnic_uapi::{Access, Progress, WcStatus};

/// A transport whose next receive, once armed, tells the test it has begun and then waits
/// until the test lets it go: a round of progress held inside the transport.
struct Held {
    inner: Box<dyn Transport + Send>,
    hold: Arc<Hold>,
    sent: Arc<Mutex<usize>>,
}

#[derive(Default)]
struct Hold {
    state: Mutex<HoldState>,
    changed: Condvar,
}

#[derive(Default)]
struct HoldState {
    armed: bool,
    entered: Option<mpsc::Sender<()>>,
}

impl Hold {
    /// Arms the hold; `entered` hears when a receive is held.
    fn arm(&self, entered: mpsc::Sender<()>) {
        let mut s = self.state.lock().unwrap();
        s.armed = true;
        s.entered = Some(entered);
    }

    fn release(&self) {
        self.state.lock().unwrap().armed = false;
        self.changed.notify_all();
    }

    fn wait_if_armed(&self) {
        let mut s = self.state.lock().unwrap();
        if let Some(tx) = s.entered.take() {
            let _ = tx.send(());
        }
        while s.armed {
            s = self.changed.wait(s).unwrap();
        }
    }
}

impl Transport for Held {
    fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
        let n = self.inner.send_batch(pkts)?;
        *self.sent.lock().unwrap() += n;
        Ok(n)
    }
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.hold.wait_if_armed();
        self.inner.recv_batch(batch)
    }
    fn poll(&mut self, timeout: Option<Duration>) -> io::Result<Ready> {
        self.inner.poll(timeout)
    }
    fn local_addr(&self) -> IpAddr {
        self.inner.local_addr()
    }
    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }
}

const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 33, 1));
const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 33, 2));

/// A polling side on `A` behind a [`Held`] transport, a polling side on `B`, connected.
fn held_pair() -> (Side, Side, Arc<Hold>, Arc<Mutex<usize>>) {
    let fabric = Fabric::new(FabricConfig::default(), 33);
    let hold = Arc::new(Hold::default());
    let sent = Arc::new(Mutex::new(0));
    let held = Held {
        inner: Box::new(fabric.attach(A).unwrap()),
        hold: hold.clone(),
        sent: sent.clone(),
    };
    let a = side_on(Box::new(held), Progress::Polling, 1);
    let b = side_on(Box::new(fabric.attach(B).unwrap()), Progress::Polling, 2);
    connect(&a, A, &b, B);
    (a, b, hold, sent)
}

#[test]
fn an_empty_poll_of_a_clean_device_leaves_the_nic_alone() {
    let (a, _b, _hold, _sent) = held_pair();
    let dev = a.ctx.device();
    // Connecting used the NIC: the first round looks, and cleans the device.
    assert!(dev.progress().looked);
    let again = dev.progress();
    assert_eq!(again.packets, 0);
    assert!(
        !again.looked,
        "nothing came, nothing is due, nothing changed"
    );
    // Any use of the NIC makes the next round look again.
    let _ = dev.nic().poll_timeout();
    assert!(dev.progress().looked);
}

#[test]
fn a_post_that_finds_the_transport_busy_leaves_with_the_round_that_holds_it() {
    let (a, b, hold, sent) = held_pair();
    let mr = a.pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let rmr = b.pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    b.qp.post_recv(&[softrnic_uapi::RecvWr {
        wr_id: 1,
        sg_list: vec![rmr.sge(0, 16)],
    }])
    .unwrap();
    // Clean A's device, so that only the post can make the held round look at the NIC.
    let _ = a.ctx.device().progress();
    assert!(!a.ctx.device().progress().looked);
    let (entered_tx, entered) = mpsc::channel();
    hold.arm(entered_tx);
    std::thread::scope(|s| {
        let dev = a.ctx.device();
        let round = s.spawn(move || dev.progress());
        entered.recv().unwrap(); // the round holds the transport, inside its receive
        let before = *sent.lock().unwrap();
        a.qp.post_send(&[signaled_send(7, mr.sge(0, 16))]).unwrap();
        assert_eq!(
            *sent.lock().unwrap(),
            before,
            "the post could not send itself"
        );
        hold.release();
        let moved = round.join().unwrap();
        assert!(moved.looked);
        assert_eq!(moved.packets, 1, "the held round sent the SEND");
    });
    let wc = b.one();
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
}
