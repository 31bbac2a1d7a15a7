//! Polling mode's short empty polls (`driver/device.rs`): a poll round that receives nothing
//! leaves the NIC alone unless the device is dirty or a timer is due, and a post that finds
//! another thread's round holding the transport waits for it and returns with its packets sent.

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
    /// The thread whose next receive is held (the idle watchdog's rounds pass).
    armed: Option<std::thread::ThreadId>,
    entered: Option<mpsc::Sender<()>>,
    /// A receive was held since the hold was last armed.
    held: bool,
}

impl Hold {
    /// Arms the hold for the calling thread's next receive; `entered` hears when it is held.
    fn arm(&self, entered: mpsc::Sender<()>) {
        let mut s = self.state.lock().unwrap();
        s.armed = Some(std::thread::current().id());
        s.entered = Some(entered);
        s.held = false;
    }

    /// Whether a receive was held since the hold was last armed.
    fn was_held(&self) -> bool {
        self.state.lock().unwrap().held
    }

    fn release(&self) {
        self.state.lock().unwrap().armed = None;
        self.changed.notify_all();
    }

    fn wait_if_armed(&self) {
        let me = Some(std::thread::current().id());
        let mut s = self.state.lock().unwrap();
        if s.armed != me {
            return;
        }
        s.held = true;
        if let Some(tx) = s.entered.take() {
            let _ = tx.send(());
        }
        while s.armed == me {
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

/// The idle watchdog of a polling device makes a round whenever nobody has for a
/// millisecond, and a round that finds the transport held by another reports that it looked
/// (the other's round may have changed the CQs). So a test of what one round does keeps the
/// device polled first (the watchdog then sleeps for milliseconds), and tries a few times:
/// a gate that is wrong fails every try.
const TRIES: usize = 5;

/// Rounds for longer than the watchdog's idle period, so that it sees the device polled.
fn keep_polled(dev: &softrnic_provider::driver::Device) {
    let until = std::time::Instant::now() + 3 * softrnic_provider::driver::IDLE_ROUND;
    while std::time::Instant::now() < until {
        let _ = dev.progress();
    }
}

#[test]
fn an_empty_poll_of_a_clean_device_leaves_the_nic_alone() {
    let (a, _b, _hold, _sent) = held_pair();
    let dev = a.ctx.device();
    let mut tries = Vec::new();
    for _ in 0..TRIES {
        keep_polled(dev);
        // Now clean: nothing came, nothing is due, nothing changed.
        let quiet = dev.progress();
        // Any use of the NIC makes the next round look again.
        let _ = dev.nic().poll_timeout();
        let after_use = dev.progress();
        tries.push((quiet, after_use));
        if !quiet.looked && quiet.packets == 0 && after_use.looked {
            return;
        }
    }
    panic!("no try left the clean device alone and looked after a use: {tries:?}");
}

#[test]
fn a_post_that_finds_the_transport_busy_waits_for_the_round_and_leaves_sent() {
    let (a, b, hold, sent) = held_pair();
    let mr = a.pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let rmr = b.pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    b.qp.post_recv(&[softrnic_uapi::RecvWr {
        wr_id: 1,
        sg_list: vec![rmr.sge(0, 16)],
    }])
    .unwrap();
    keep_polled(a.ctx.device());
    let (entered_tx, entered) = mpsc::channel();
    std::thread::scope(|s| {
        let dev = a.ctx.device();
        let hold = &hold;
        // A round that finds the watchdog's holding the transport returns without
        // receiving: it is tried again until one is held.
        let round = s.spawn(move || loop {
            hold.arm(entered_tx.clone());
            let moved = dev.progress();
            if hold.was_held() {
                return moved;
            }
        });
        entered.recv().unwrap(); // the round holds the transport, inside its receive
        let before = *sent.lock().unwrap();
        let (posted_tx, posted) = mpsc::channel();
        let (qp, sent_now) = (&a.qp, &sent);
        s.spawn(move || {
            qp.post_send(&[signaled_send(7, mr.sge(0, 16))]).unwrap();
            posted_tx.send(*sent_now.lock().unwrap()).unwrap();
        });
        assert_eq!(
            posted.recv_timeout(Duration::from_millis(200)),
            Err(mpsc::RecvTimeoutError::Timeout),
            "the post returned while another round held the transport"
        );
        hold.release();
        round.join().unwrap();
        let at_return = posted.recv().unwrap();
        assert_eq!(
            at_return,
            before + 1,
            "the SEND had left when the post returned"
        );
    });
    let wc = b.one();
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
}
