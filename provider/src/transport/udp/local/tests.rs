//! Tests of the host-local path: two transports of this process on their own loopback
//! addresses (127.0.91.x), as two devices of one host.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use softrnic_wire::bth;

use super::*;
use crate::transport::test_util::send_only;
use crate::transport::{
    Bytes, IcrcStatus, OutPacket, RecvBatch, RecvMeta, RecvPacket, Transport, UdpTransport,
};

fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 91, last))
}

fn local(ip: IpAddr) -> UdpTransport {
    UdpTransport::bind(ip)
        .unwrap_or_else(|e| panic!("binding {ip}:4791: {e}"))
        .with_local_path()
        .unwrap_or_else(|(_, e)| panic!("opening the inbox of {ip}: {e}"))
}

/// An RC SEND_ONLY from `src` (port 0xc000) to QP 0x4011 of `dst`, PSN `psn`, as one piece.
fn packet(src: IpAddr, dst: IpAddr, psn: u32, body: &[u8]) -> Vec<u8> {
    let (mut bytes, trailer) = send_only((src, 0xc000), dst, 0x4011, psn, body);
    bytes.extend_from_slice(body);
    bytes.extend_from_slice(&trailer);
    bytes
}

fn send(t: &mut UdpTransport, dst: IpAddr, bytes: &[u8]) -> usize {
    let pieces = [Bytes::from(bytes)];
    let p = OutPacket {
        dst: SocketAddr::new(dst, 4791),
        src_port: 0xc000,
        pieces: &pieces,
        segment: 0,
        ident: 0,
    };
    t.send_batch(&[p]).unwrap()
}

/// Sends from `a` to `b` until a datagram went through `b`'s inbox; returns what `b`
/// received, each with its ICRC's status.
fn until_local(a: &mut UdpTransport, b: &mut UdpTransport) -> Vec<(Vec<u8>, IcrcStatus)> {
    let mut batch = RecvBatch::new(16, 4608);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut psn = 0;
    while b.stats().rx_local == 0 {
        assert!(Instant::now() < deadline, "no lane after 5 s");
        send(
            a,
            b.local_addr(),
            &packet(a.local_addr(), b.local_addr(), psn, b"ping"),
        );
        psn += 1;
        for _ in 0..100 {
            b.recv_batch(&mut batch).unwrap();
            got.extend(batch.iter().map(|p| (p.payload.to_vec(), p.icrc_status())));
        }
    }
    got
}

#[test]
fn datagrams_go_through_the_inbox_once_the_lane_is_given() {
    let (mut a, mut b) = (local(lo(1)), local(lo(2)));
    let got = until_local(&mut a, &mut b);
    let (tx, rx) = (a.stats(), b.stats());
    assert!(tx.tx_local >= 1, "{tx:?}");
    assert_eq!(
        tx.tx_packets,
        got.len() as u64,
        "every datagram sent arrived: {tx:?}"
    );
    assert_eq!((rx.rx_packets, rx.rx_local), (got.len() as u64, 1));
    assert_eq!(a.local_lanes(), (0, 1));
    assert_eq!(b.local_lanes(), (1, 0));
    // The ICRC of a datagram through the inbox is not checked (below, it would verify).
    let (last, status) = got.last().unwrap();
    assert_eq!(*status, IcrcStatus::Ok);
    assert_eq!(
        *last,
        packet(lo(1), lo(2), got.len() as u32 - 1, b"ping"),
        "the datagram as sent"
    );
    // The other way too, and from now on every datagram goes through a lane.
    until_local(&mut b, &mut a);
    let mut batch = RecvBatch::new(16, 4608);
    let before = a.stats().rx_local;
    for psn in 0..40 {
        assert_eq!(
            send(&mut b, lo(1), &packet(lo(2), lo(1), psn, &[psn as u8; 300])),
            1
        );
    }
    let mut got = 0;
    while got < 40 {
        a.recv_batch(&mut batch).unwrap();
        for (i, p) in batch.iter().enumerate() {
            assert!(p.meta.intact, "{:?}", p.meta);
            assert_eq!(p.icrc_status(), IcrcStatus::Ok);
            // Checked as a datagram over a link, with the IP header the receiver rebuilt,
            // the sender's ICRC verifies exactly.
            let linked = RecvMeta {
                intact: false,
                ..*p.meta
            };
            let checked = RecvPacket {
                meta: &linked,
                payload: p.payload,
            };
            assert_eq!(checked.icrc_status(), IcrcStatus::Ok);
            let mut flipped = p.payload.to_vec();
            *flipped.last_mut().unwrap() ^= 1;
            let bad = RecvPacket {
                meta: &linked,
                payload: &flipped,
            };
            assert_eq!(bad.icrc_status(), IcrcStatus::Bad);
            let psn = bth::Packet::new_checked(p.payload).unwrap().psn();
            assert_eq!(psn.value(), (got + i) as u32, "in order");
            assert_eq!(p.meta.src, SocketAddr::new(lo(2), 0xc000));
        }
        got += batch.len();
    }
    assert_eq!(a.stats().rx_local - before, 40);
}

#[test]
fn a_batch_for_a_lane_goes_in_as_far_as_there_is_room() {
    let (mut a, mut b) = (local(lo(5)), local(lo(6)));
    until_local(&mut a, &mut b);
    let mut batch = RecvBatch::new(16, 4608);
    while b.recv_batch(&mut batch).unwrap() > 0 {}
    let filler = packet(lo(5), lo(6), 0, b"x");
    for _ in 0..SLOTS - 3 {
        send(&mut a, lo(6), &filler);
    }
    // Five packets in one batch (an ACK and a WRITE's segments, say): three fit.
    let bodies: Vec<Vec<u8>> = (1000..1005)
        .map(|psn| packet(lo(5), lo(6), psn, b"y"))
        .collect();
    let pieces: Vec<[Bytes<'_>; 1]> = bodies.iter().map(|b| [Bytes::from(&b[..])]).collect();
    let pkts: Vec<OutPacket<'_>> = pieces
        .iter()
        .map(|p| OutPacket {
            dst: SocketAddr::new(lo(6), 4791),
            src_port: 0xc000,
            pieces: p,
            segment: 0,
            ident: 0,
        })
        .collect();
    let before = a.stats();
    assert_eq!(a.send_batch(&pkts).unwrap(), 5, "a send never blocks");
    let st = a.stats();
    assert_eq!(
        (
            st.tx_local - before.tx_local,
            st.tx_local_dropped - before.tx_local_dropped
        ),
        (3, 2)
    );
    let mut psns = Vec::new();
    while b.recv_batch(&mut batch).unwrap() > 0 {
        psns.extend(
            batch
                .iter()
                .map(|p| bth::Packet::new_checked(p.payload).unwrap().psn().value()),
        );
    }
    assert_eq!(psns.len() as u64, SLOTS);
    assert_eq!(
        psns[psns.len() - 3..],
        [1000, 1001, 1002],
        "the first three, in order"
    );
}

#[test]
fn a_full_lane_drops_what_it_cannot_hold() {
    let (mut a, mut b) = (local(lo(3)), local(lo(4)));
    until_local(&mut a, &mut b);
    let bytes = packet(lo(3), lo(4), 0, b"x");
    let before = a.stats().tx_local;
    let sent: usize = (0..SLOTS + 10).map(|_| send(&mut a, lo(4), &bytes)).sum();
    assert_eq!(sent as u64, SLOTS + 10, "a send never blocks");
    let st = a.stats();
    assert_eq!((st.tx_local - before, st.tx_local_dropped), (SLOTS, 10));
    let mut batch = RecvBatch::new(16, 4608);
    let mut got = 0;
    while b.recv_batch(&mut batch).unwrap() > 0 {
        got += batch.len() as u64;
    }
    assert_eq!(got, SLOTS, "the lane held SLOTS datagrams");
    assert_eq!(send(&mut a, lo(4), &bytes), 1);
    assert_eq!(
        a.stats().tx_local - before,
        SLOTS + 1,
        "room again once read"
    );
}

/// A received datagram stays in its slot (the batch points at it) until the receiver says it
/// handled the batch: until then its sender finds no room there, and the payload the batch
/// shows is the one sent.
#[test]
fn a_datagram_stays_in_its_slot_until_the_batch_is_released() {
    let (mut a, mut b) = (local(lo(11)), local(lo(12)));
    until_local(&mut a, &mut b);
    let mut batch = RecvBatch::new(16, 4608);
    while b.recv_batch(&mut batch).unwrap() > 0 {
        b.release_received();
    }
    let sent: Vec<Vec<u8>> = (0..SLOTS as u32)
        .map(|psn| packet(lo(11), lo(12), psn, &psn.to_le_bytes()))
        .collect();
    for bytes in &sent {
        assert_eq!(send(&mut a, lo(12), bytes), 1);
    }
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 16);
    let dropped = a.stats().tx_local_dropped;
    send(&mut a, lo(12), &sent[0]);
    assert_eq!(
        a.stats().tx_local_dropped,
        dropped + 1,
        "no room before the release"
    );
    for (i, p) in batch.iter().enumerate() {
        assert_eq!(p.payload, &sent[i][..], "datagram {i}");
    }
    b.release_received();
    send(&mut a, lo(12), &sent[0]);
    assert_eq!(
        a.stats().tx_local_dropped,
        dropped + 1,
        "room once released"
    );
}

/// Changing a batch's slots (as a fault injector does) first copies the datagrams left in
/// their lane into the slots: they stay what was received after the lane's room is reused.
#[test]
fn a_batch_changed_in_place_holds_copies_of_what_stayed_in_the_lane() {
    let (mut a, mut b) = (local(lo(13)), local(lo(14)));
    until_local(&mut a, &mut b);
    let mut batch = RecvBatch::new(16, 4608);
    while b.recv_batch(&mut batch).unwrap() > 0 {
        b.release_received();
    }
    let first = packet(lo(13), lo(14), 7, b"first");
    send(&mut a, lo(14), &first);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
    let (buf, meta) = batch.slots_mut().next().unwrap();
    assert_eq!(&buf[..meta.len], &first[..]);
    b.release_received();
    // The lane's slots are written again, every one of them (a whole lap).
    let other = packet(lo(13), lo(14), 8, b"other");
    let mut other_batch = RecvBatch::new(16, 4608);
    for _ in 0..SLOTS {
        send(&mut a, lo(14), &other);
        while b.recv_batch(&mut other_batch).unwrap() > 0 {
            b.release_received();
        }
    }
    assert_eq!(batch.get(0).unwrap().payload, &first[..]);
    // Filling the batch again forgets what it held.
    batch.set_len(0);
    assert!(batch.get(0).is_none());
}

#[test]
fn a_sleeping_receiver_is_rung_and_a_polling_one_is_not() {
    let (mut a, mut b) = (local(lo(5)), local(lo(6)));
    until_local(&mut a, &mut b);
    let gate = b.sleep_gate().expect("a gate");
    let bell = gate.fds()[0];
    let bytes = packet(lo(5), lo(6), 0, b"x");
    send(&mut a, lo(6), &bytes);
    assert!(!readable(bell), "nobody sleeps: no doorbell");
    assert!(
        !gate.sleep(),
        "a datagram is pending: the thread must not sleep"
    );
    let mut batch = RecvBatch::new(16, 4608);
    while b.recv_batch(&mut batch).unwrap() > 0 {}
    assert!(gate.sleep(), "nothing pending");
    send(&mut a, lo(6), &bytes);
    assert!(readable(bell), "the sender rang");
    gate.woke(true, false);
    assert!(!readable(bell), "the ring was taken");
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
}

/// Whether `fd` is readable now.
fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn a_receiver_that_leaves_datagrams_unread_is_rung_once_by_their_sender() {
    let (mut a, mut b) = (local(lo(9)), local(lo(10)));
    until_local(&mut a, &mut b);
    let bell = b.sleep_gate().expect("a gate").fds()[0];
    let mut batch = RecvBatch::new(16, 4608);
    while b.recv_batch(&mut batch).unwrap() > 0 {}
    let bytes = packet(lo(9), lo(10), 0, b"x");
    // A receiver that reads (and, as a driver does, says it handled what it read) is never
    // rung, however long its sender watches.
    send(&mut a, lo(10), &bytes);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
    b.release_received();
    let until = Instant::now() + unread::STALE * 3;
    while Instant::now() < until {
        a.recv_batch(&mut batch).unwrap();
    }
    assert!(!readable(bell));
    assert_eq!(a.stats().tx_local_rung, 0);
    // One that leaves a datagram unread is rung once STALE passed, and once only.
    send(&mut a, lo(10), &bytes);
    let sent = Instant::now();
    a.recv_batch(&mut batch).unwrap();
    assert!(!readable(bell), "not at once");
    while !readable(bell) {
        assert!(sent.elapsed() < Duration::from_secs(5), "never rung");
        a.recv_batch(&mut batch).unwrap();
    }
    assert!(sent.elapsed() >= unread::STALE);
    b.sleep_gate().unwrap().woke(true, false);
    let until = Instant::now() + unread::STALE * 3;
    while Instant::now() < until {
        a.recv_batch(&mut batch).unwrap();
    }
    assert!(!readable(bell), "rung once");
    assert_eq!(a.stats().tx_local_rung, 1);
    assert_eq!(b.recv_batch(&mut batch).unwrap(), 1, "the datagram waited");
}

#[test]
fn a_sender_goes_back_to_udp_when_the_receiver_is_gone() {
    let (mut a, mut b) = (local(lo(7)), local(lo(8)));
    until_local(&mut a, &mut b);
    drop(b);
    let b = UdpTransport::bind(lo(8)).unwrap().without_ring();
    std::thread::sleep(Duration::from_millis(20));
    let bytes = packet(lo(7), lo(8), 0, b"x");
    let local_before = a.stats().tx_local;
    send(&mut a, lo(8), &bytes);
    send(&mut a, lo(8), &bytes);
    assert_eq!(a.stats().tx_local, local_before, "no lane to a gone inbox");
    assert_eq!(a.local_lanes(), (0, 0));
    let mut b = b;
    let mut batch = RecvBatch::new(16, 4608);
    let deadline = Instant::now() + Duration::from_secs(5);
    while batch.is_empty() && Instant::now() < deadline {
        b.recv_batch(&mut batch).unwrap();
    }
    assert!(!batch.is_empty(), "the datagram came over UDP");
}

#[test]
fn a_slot_is_published_by_its_sequence_word_for_one_lap() {
    let r = Region::create().unwrap();
    let h = SlotHeader {
        len: 4,
        src_port: 7,
        ident: 9,
        src: lo(1),
    };
    assert!(!r.published(3, 0), "fresh memory publishes nothing");
    // SAFETY: this test is the lane's only producer.
    unsafe { r.write_slot(3, 0, &h, |at| std::ptr::write_bytes(at, 1, 4)) };
    assert!(!r.published(3, 0), "written, not yet published");
    // SAFETY: as above.
    unsafe { r.publish(3, 0) };
    assert!(r.published(3, 0));
    assert!(!r.published(3, 1), "the next slot is not");
    assert!(
        !r.published(3, SLOTS),
        "the same slot a lap later holds another datagram"
    );
    assert!(!r.published(2, 0), "other lanes are not");
    // SAFETY: as above.
    unsafe {
        r.write_slot(3, SLOTS, &h, |at| std::ptr::write_bytes(at, 2, 4));
        r.publish(3, SLOTS);
    }
    assert!(r.published(3, SLOTS) && !r.published(3, 0));
}

#[test]
fn a_populated_lane_is_resident_before_its_first_datagram() {
    let r = Region::create().unwrap();
    // Pages of lane 5's slots resident, of 64 looked at across the lane.
    let resident = |r: &Region| {
        let start = Region::lane(5).div_ceil(4096) * 4096;
        let mut v = [0u8; 64];
        // SAFETY: 64 pages inside the mapping (a lane is over 1000); `v` has a byte each.
        let rc = unsafe { libc::mincore(r.at(start).cast(), 64 * 4096, v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        v.iter().filter(|&&b| b & 1 == 1).count()
    };
    assert_eq!(resident(&r), 0, "a fresh region has no pages");
    r.populate_lane(5);
    assert_eq!(resident(&r), 64, "every page of the lane");
}

#[test]
fn a_malformed_slot_is_dropped_and_a_long_one_cut() {
    let r = Region::create().unwrap();
    let h = SlotHeader {
        len: 100,
        src_port: 7,
        ident: 9,
        src: lo(1),
    };
    // SAFETY: this test is the lane's only producer and consumer.
    unsafe {
        r.write_slot(0, 0, &h, |at| std::ptr::write_bytes(at, 0xab, 100));
        r.publish(0, 0);
        assert_eq!(r.read_header(0, 0), Some(h));
        let payload = std::slice::from_raw_parts(r.payload(0, 0), h.len);
        assert_eq!(payload, [0xab; 100]);
        // An unknown address family, then a length beyond the slot.
        r.slot(0, 1).add(8).write(9);
        assert_eq!(r.read_header(0, 1), None);
        r.write_slot(0, 2, &h, |at| std::ptr::write_bytes(at, 0, 100));
        r.publish(0, 2);
        r.slot(0, 2)
            .cast::<u32>()
            .write_unaligned(SLOT_PAYLOAD as u32 + 1);
        assert_eq!(r.read_header(0, 2), None);
    }
    // A region of another layout is refused.
    let fd = r.fd().try_clone().unwrap();
    // SAFETY: the mapping is ours; the magic is the first word.
    unsafe { r.at(0).cast::<u64>().write(0) };
    assert!(Region::open(fd).is_err());
}

#[test]
fn a_datagram_for_a_lane_wants_no_icrc_and_one_over_udp_does() {
    let (mut a, mut b) = (local(lo(7)), local(lo(8)));
    let to = |ip| SocketAddr::new(ip, 4791);
    // Before the lane: over UDP, with its ICRC.
    assert!(a.wants_icrc(to(lo(8)), 0x4011, 100));
    until_local(&mut a, &mut b);
    assert!(!a.wants_icrc(to(lo(8)), 0x4011, 100), "into b's lane");
    assert!(
        a.wants_icrc(to(lo(8)), 0x4011, SLOT_PAYLOAD + 1),
        "longer than a slot: over UDP"
    );
    assert!(
        a.wants_icrc(to(lo(9)), 0x4011, 100),
        "no inbox on 127.0.91.9"
    );
    assert!(a.wants_icrc(SocketAddr::new(lo(8), 4792), 0x4011, 100));
    let group = IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3));
    assert!(a.wants_icrc(to(group), 0xff_ffff, 100), "multicast");
}
