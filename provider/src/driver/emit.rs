//! From the engine's [`Transmit`]s to datagrams on a [`Transport`]: the IP/UDP/BTH headers
//! written into reused scratch space, the payload pinned in registered memory and handed to
//! the transport as it is (no copy), the ICRC (IBTA A17.4.2) computed over the pinned bytes.
//!
//! The application may write its registered memory while it is being sent, so the pinned
//! payload is never seen as a slice (`mr/bytes.rs`): it goes to the transport as [`Bytes`]
//! (pointer and length, which the transport hands to the kernel by address or copies), and
//! the ICRC reads it through the pointer ([`Bytes::update_icrc`]). What a racing write does to
//! the packet is unspecified, as with a NIC's DMA; its ICRC may then not match, and the
//! receiver drops it.
//! Packets the transport can send as one segmentation run (UDP GSO) are marked as such, and
//! their ICRCs cover the IPv4 Identification each will carry (see `runs.rs`). They also cover
//! the UDP source port, which the transport names before a packet is built
//! ([`Transport::source_port`]: the QP's own, unless another socket of the host holds it).
//! A packet the transport will write into another device's memory on this host (the
//! host-local path, whose receiver does not check ICRCs) goes with a zero ICRC
//! ([`Transport::wants_icrc`]): the pass over the payload it saves cost `ib_write_bw -s
//! 65536` a sixth of its throughput (medians of four alternating runs: one QP 5 589 against
//! 4 753 MB/s, sixteen QPs 5 423 against 4 651).
//!
//! Nothing here allocates per packet: the scratch vectors keep their capacity from batch to
//! batch (the per-batch vectors of borrowed pieces are recycled through an empty `'static`
//! vector of the same layout).

use std::io;
use std::net::{IpAddr, SocketAddr};

use softrnic_wire::frame::{DatagramRepr, IpHeader, UdpHeader};
use softrnic_wire::icrc::{Icrc, ICRC_LEN};
use softrnic_wire::roce::pad_len;
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::runs::Runs;
use crate::mr::{Bytes, MrTable, PinError, ReadPin};
use crate::qp::{Payload, Transmit, MAX_INLINE};
use crate::transport::idents::PortIdents;
use crate::transport::{OutPacket, Transport, HOP_LIMIT};

/// Room for the ICRC's masked view of IPv6 + UDP (after the LRH placeholder), the BTH and the
/// largest extension headers.
const HEADER_ROOM: usize = 128;

/// Room for a whole packet without a payload in registered memory: headers, inline data, pad
/// and ICRC. Such a packet goes to the transport as one piece (one iovec: the kernel's cost
/// grows with the pieces, and the inline bytes are a copy already).
const FRAME_ROOM: usize = HEADER_ROOM + MAX_INLINE + 8;

/// Counters of the emitter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmitStats {
    /// Packets handed to the transport.
    pub sent: u64,
    /// Packets dropped because a key died between the engine and the pin.
    pub dead_key_drops: u64,
    /// Packets that could not be built (a bug, or mixed address families).
    pub build_errors: u64,
}

/// Turns transmits into datagrams. One per driver; reused for every batch.
#[derive(Debug)]
pub struct Emitter {
    local: IpAddr,
    /// Per packet: its headers, or (no payload in registered memory) all of it.
    headers: Vec<[u8; FRAME_ROOM]>,
    trailers: Vec<[u8; 8]>,
    spans: Vec<Span>,
    pins: Spare<ReadPin<'static>>,
    pieces: Vec<Bytes<'static>>,
    pkts: Vec<OutPacket<'static>>,
    /// (packet index, first piece, piece count) of each packet that goes out.
    outs: Vec<(usize, usize, usize)>,
    idents: PortIdents,
    stats: EmitStats,
}

/// Where packet `i` of a batch lies in the scratch space.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    /// BTH start and headers end in `headers[i]`.
    h0: usize,
    h1: usize,
    /// Trailer (pad + ICRC) length in `trailers[i]`; 0 when `headers[i][h0..h1]` is the whole
    /// packet.
    t: usize,
    /// Its pins: `pins[p0..p1]`.
    p0: usize,
    p1: usize,
    /// Its place in its segmentation run.
    segment: u16,
    /// The UDP source port it leaves from ([`Transport::source_port`]).
    src_port: u16,
    /// The IPv4 Identification its ICRC covers.
    ident: u16,
    /// Whether it goes out (not dropped).
    ok: bool,
}

/// The allocation of a vector of pins, kept between batches.
#[derive(Debug, Default)]
struct Spare<T>(Vec<T>);

// SAFETY: the vector is empty whenever the emitter is not inside `Emitter::send` (which holds
// it by `&mut self` and empties it before returning), so no pin ever crosses a thread.
unsafe impl<T> Send for Spare<T> {}

/// Reuses an empty vector's allocation for another lifetime (same layout, so `collect`
/// reuses it in place).
fn recycle<A, B>(mut v: Vec<A>) -> Vec<B> {
    v.clear();
    v.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}

impl Emitter {
    /// An emitter for a device whose address is `local`.
    pub fn new(local: IpAddr, batch: usize) -> Emitter {
        Emitter {
            local,
            headers: vec![[0; FRAME_ROOM]; batch],
            trailers: vec![[0; 8]; batch],
            spans: Vec::with_capacity(batch),
            pins: Spare(Vec::with_capacity(batch * 2)),
            pieces: Vec::with_capacity(batch * 4),
            pkts: Vec::with_capacity(batch),
            outs: Vec::with_capacity(batch),
            idents: PortIdents::default(),
            stats: EmitStats::default(),
        }
    }

    /// The most transmits one [`Emitter::send`] takes.
    pub fn batch(&self) -> usize {
        self.headers.len()
    }

    /// The counters.
    pub fn stats(&self) -> EmitStats {
        self.stats
    }

    /// Sends `txs` (at most [`Emitter::batch`]). Returns how many are done with (sent or
    /// dropped); fewer than `txs.len()` when the transport would block or a payload's region is
    /// locked — call again with the rest.
    ///
    /// # Errors
    /// The transport's error for the first packet.
    pub fn send(
        &mut self,
        txs: &[Transmit],
        mrs: &MrTable,
        transport: &mut dyn Transport,
    ) -> io::Result<usize> {
        let txs = &txs[..txs.len().min(self.batch())];
        let mut pins: Vec<ReadPin<'_>> = recycle(std::mem::take(&mut self.pins.0));
        let mut pieces: Vec<Bytes<'_>> = recycle(std::mem::take(&mut self.pieces));
        let mut pkts: Vec<OutPacket<'_>> = recycle(std::mem::take(&mut self.pkts));
        self.outs.clear();
        self.spans.clear();
        let mut runs = Runs::new(transport.segment_limits());
        self.idents.clear();
        // The last transmit's source port, destination and QP, the port it leaves from and
        // whether its ICRC is wanted: a QP's packets come one after another, and the
        // transport is asked once for them.
        let mut port: Option<(u16, IpAddr, u32, u16, bool)> = None;
        // Pass 1: headers, pins and ICRCs, into scratch space.
        for (i, tx) in txs.iter().enumerate() {
            let p0 = pins.len();
            let qpn = tx.roce.bth.dest_qp;
            let (src_port, icrc) = match port {
                Some((wanted, dst, q, from, icrc))
                    if wanted == tx.src_port && dst == tx.dst && q == qpn =>
                {
                    (from, icrc)
                }
                _ => {
                    let dst = SocketAddr::new(tx.dst, ROCE_V2_UDP_PORT);
                    let icrc = transport.wants_icrc(dst, qpn, tx.roce.buffer_len());
                    // A datagram that wants no ICRC goes into a lane, from no socket: it
                    // names the QP's own port, and its IPv4 ID is its place in its run. No
                    // socket is opened or looked up for it: there is one per QP's port, and
                    // with 1024 QPs writing host-local the lookups missed the cache.
                    let from = if icrc {
                        transport.source_port(tx.src_port, dst)
                    } else {
                        tx.src_port
                    };
                    port = Some((tx.src_port, tx.dst, qpn, from, icrc));
                    (from, icrc)
                }
            };
            let segment = runs.place(src_port, tx.dst, tx.roce.buffer_len(), pieces_of(tx));
            let ident = if icrc {
                self.idents
                    .next(src_port, segment, || transport.ipv4_ident(src_port))
                    .unwrap_or(segment)
            } else {
                segment
            };
            let mut span = Span {
                p0,
                ..Span::default()
            };
            match pin_payload(tx, mrs, &mut pins, i == 0) {
                Ok(()) => match self.build(i, tx, &pins[p0..], (src_port, ident, icrc)) {
                    Ok((h0, h1, t)) => {
                        span = Span {
                            h0,
                            h1,
                            t,
                            p0,
                            p1: pins.len(),
                            segment,
                            src_port,
                            ident,
                            ok: true,
                        }
                    }
                    Err(()) => self.stats.build_errors += 1,
                },
                Err(PinError::WouldBlock) => {
                    pins.truncate(p0);
                    break;
                }
                Err(PinError::Access(_)) => self.stats.dead_key_drops += 1,
            }
            if !span.ok {
                runs.drop_last();
                if icrc {
                    self.idents.drop_last(src_port, segment);
                }
            }
            pins.truncate(span.p1.max(p0));
            self.spans.push(span);
        }
        let taken = self.spans.len();
        // Pass 2: the piece lists (scratch space no longer changes).
        for (i, s) in self.spans.iter().enumerate() {
            if !s.ok {
                continue;
            }
            let first = pieces.len();
            pieces.push(Bytes::from(&self.headers[i][s.h0..s.h1]));
            if s.t > 0 {
                pieces.extend(pins[s.p0..s.p1].iter().map(ReadPin::bytes));
                pieces.push(Bytes::from(&self.trailers[i][..s.t]));
            }
            self.outs.push((i, first, pieces.len() - first));
        }
        for &(i, first, n) in &self.outs {
            pkts.push(OutPacket {
                dst: SocketAddr::new(txs[i].dst, ROCE_V2_UDP_PORT),
                src_port: self.spans[i].src_port,
                pieces: &pieces[first..first + n],
                segment: self.spans[i].segment,
                ident: self.spans[i].ident,
            });
        }
        let mut done = 0;
        let mut err = None;
        while done < pkts.len() {
            match transport.send_batch(&pkts[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        self.stats.sent += done as u64;
        let result = match err {
            Some(e) if done == 0 => Err(e),
            // Transmits before the first unsent packet are done with.
            _ if done < pkts.len() => Ok(self.outs[done].0),
            _ => Ok(taken),
        };
        self.pkts = recycle(pkts);
        self.pieces = recycle(pieces);
        self.pins = Spare(recycle(pins));
        result
    }

    /// Writes packet `i`'s headers and trailer, from UDP source port `src_port` and for the
    /// IPv4 Identification `ident` it will carry (see `transport/idents.rs`), its ICRC
    /// computed if `icrc` (else zero, [`Transport::wants_icrc`]); returns (BTH start,
    /// headers end, trailer len). A packet without a payload in registered memory is written
    /// whole, the trailer length then 0.
    ///
    /// The headers go in behind the ICRC's masked view of the IP and UDP headers (which only
    /// the ICRC reads: the transport sends from the BTH on), so that the ICRC runs over one
    /// contiguous stretch: for a whole packet, everything it covers.
    fn build(
        &mut self,
        i: usize,
        tx: &Transmit,
        payload: &[ReadPin<'_>],
        (src_port, ident, icrc): (u16, u16, bool),
    ) -> Result<(usize, usize, usize), ()> {
        let ip = IpHeader::udp_socket(self.local, tx.dst, HOP_LIMIT)
            .ok_or(())?
            .with_ident(ident);
        let d = DatagramRepr {
            ip,
            udp: UdpHeader {
                src_port,
                dst_port: ROCE_V2_UDP_PORT,
                checksum: 0,
            },
            roce: tx.roce,
        };
        let buf = &mut self.headers[i];
        let h0 = d.masked_prefix_len();
        let n = d.emit_masked(buf).map_err(drop)?;
        let len = tx.roce.payload_len;
        let pad = pad_len(len);
        let inline = match &tx.payload {
            Payload::None => &[][..],
            Payload::Inline { bytes, len } => &bytes[..*len as usize],
            Payload::Memory(_) => {
                if payload.iter().map(|p| p.len()).sum::<usize>() != len {
                    return Err(());
                }
                let crc = if icrc {
                    let mut c = Icrc::start_masked(&mut buf[..n], h0).map_err(drop)?;
                    for p in payload {
                        p.bytes().update_icrc(&mut c);
                    }
                    c.update(&[0; 3][..pad]);
                    c.finish()
                } else {
                    0
                };
                let t = &mut self.trailers[i];
                t[..pad].fill(0);
                t[pad..pad + ICRC_LEN].copy_from_slice(&crc.to_le_bytes());
                return Ok((h0, n, pad + ICRC_LEN));
            }
        };
        if inline.len() != len {
            return Err(());
        }
        let end = n + len + pad;
        buf[n..n + len].copy_from_slice(inline);
        buf[n + len..end].fill(0);
        let crc = if icrc {
            Icrc::start_masked(&mut buf[..end], h0)
                .map_err(drop)?
                .finish()
        } else {
            0
        };
        buf[end..end + ICRC_LEN].copy_from_slice(&crc.to_le_bytes());
        Ok((h0, end + ICRC_LEN, 0))
    }
}

/// How many pieces `tx` goes out in: headers, payload, trailer; or one (see `FRAME_ROOM`).
fn pieces_of(tx: &Transmit) -> usize {
    match &tx.payload {
        Payload::None | Payload::Inline { .. } => 1,
        Payload::Memory(chunks) => 2 + chunks.as_slice().len(),
    }
}

/// Pins the payload chunks of `tx`. The first chunk of a batch may wait for its lock (no pin
/// is held yet); every other pin only tries.
fn pin_payload<'m>(
    tx: &Transmit,
    mrs: &'m MrTable,
    pins: &mut Vec<ReadPin<'m>>,
    may_block: bool,
) -> Result<(), PinError> {
    let Payload::Memory(chunks) = &tx.payload else {
        return Ok(());
    };
    for (k, c) in chunks.as_slice().iter().enumerate() {
        let pin = if may_block && k == 0 {
            mrs.pin_read_blocking(c.key, chunks.pd, chunks.why, c.va, c.len as usize)
                .map_err(PinError::Access)?
        } else {
            mrs.try_pin_read(c.key, chunks.pd, chunks.why, c.va, c.len as usize)?
        };
        pins.push(pin);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use softrnic_wire::aeth::{AethRepr, CreditCode, Syndrome};
    use softrnic_wire::frame::UDP_HEADER_LEN;
    use softrnic_wire::opcode::Opcode;
    use softrnic_wire::psn::Psn;

    use super::*;
    use crate::mr::PdHandle;
    use crate::qp::QpContext;
    use crate::transport::{Ready, RecvBatch, TransportStats};

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 34, 7));
    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 34, 8));

    /// Keeps what it is asked to send: per packet, its pieces' count and its bytes (`sent`),
    /// and its source port and IPv4 ID (`ports`). Wants no ICRC if `lane` (as the host-local
    /// path's lanes). With `sockets`, its sockets moved every port to 0xd000 (as when another
    /// socket holds a QP's) and count IPv4 IDs from 100; `asked` counts the ports asked for.
    #[derive(Default)]
    struct Recorder {
        sent: Vec<(usize, Vec<u8>)>,
        lane: bool,
        sockets: bool,
        ports: Vec<(u16, u16)>,
        asked: usize,
    }

    impl Transport for Recorder {
        fn wants_icrc(&mut self, _: SocketAddr, _: u32, _: usize) -> bool {
            !self.lane
        }
        fn source_port(&mut self, src_port: u16, _: SocketAddr) -> u16 {
            self.asked += 1;
            if self.sockets {
                0xd000
            } else {
                src_port
            }
        }
        fn ipv4_ident(&self, _: u16) -> Option<u16> {
            self.sockets.then_some(100)
        }
        fn send_batch(&mut self, pkts: &[OutPacket<'_>]) -> io::Result<usize> {
            self.sent.extend(pkts.iter().map(|p| {
                let mut bytes = Vec::new();
                p.pieces.iter().for_each(|b| b.append_to(&mut bytes));
                (p.pieces.len(), bytes)
            }));
            self.ports
                .extend(pkts.iter().map(|p| (p.src_port, p.ident)));
            Ok(pkts.len())
        }
        fn recv_batch(&mut self, _: &mut RecvBatch) -> io::Result<usize> {
            Ok(0)
        }
        fn poll(&mut self, _: Option<Duration>) -> io::Result<Ready> {
            Ok(Ready {
                recv: false,
                send: true,
            })
        }
        fn local_addr(&self) -> IpAddr {
            LOCAL
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
    }

    fn transmit(opcode: Opcode, payload: Payload, len: usize) -> Transmit {
        let mut ctx = QpContext::new(0x10, PdHandle(1), 0xc000, false);
        ctx.dest_qpn = 0x11;
        let mut roce = ctx.header(opcode, Psn::new(7), true);
        roce.payload_len = len;
        if opcode == Opcode::RC_ACKNOWLEDGE {
            roce.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack(CreditCode::UNLIMITED),
                msn: 3,
            });
        }
        Transmit {
            dst: PEER,
            src_port: 0xc000,
            roce,
            payload,
        }
    }

    #[test]
    fn a_packet_without_a_payload_in_memory_goes_whole_as_one_piece() {
        let mut bytes = [0u8; MAX_INLINE];
        bytes[..5].copy_from_slice(b"hello");
        let txs = [
            transmit(Opcode::RC_SEND_ONLY, Payload::Inline { bytes, len: 5 }, 5),
            transmit(Opcode::RC_ACKNOWLEDGE, Payload::None, 0),
        ];
        let mrs = MrTable::new(4, 1).unwrap();
        let mut out = Recorder::default();
        let mut e = Emitter::new(LOCAL, 4);
        assert_eq!(e.send(&txs, &mrs, &mut out).unwrap(), 2);
        for (k, (tx, (pieces, sent))) in txs.iter().zip(&out.sent).enumerate() {
            assert_eq!(*pieces, 1, "packet {k}");
            // The whole datagram as the wire crate writes it, from the BTH on.
            let d = datagram(tx);
            let mut whole = vec![0u8; d.buffer_len()];
            let inline: &[u8] = if k == 0 { b"hello" } else { b"" };
            let n = d.emit(&mut whole, &[inline]).unwrap();
            let from = d.ip.header_len() + UDP_HEADER_LEN;
            assert_eq!(sent[..], whole[from..n], "packet {k}");
        }
    }

    /// `tx` as the wire crate writes a datagram from LOCAL to PEER (source port 0xc000).
    fn datagram(tx: &Transmit) -> DatagramRepr {
        DatagramRepr {
            ip: IpHeader::udp_socket(LOCAL, PEER, HOP_LIMIT).unwrap(),
            udp: UdpHeader {
                src_port: 0xc000,
                dst_port: ROCE_V2_UDP_PORT,
                checksum: 0,
            },
            roce: tx.roce,
        }
    }

    /// A table with `region` registered at `va` in PD 1 for local access, and its L_Key. The
    /// table must be dropped before `region`.
    fn registered(region: &mut [u8], va: u64) -> (MrTable, u32) {
        let mrs = MrTable::new(4, 1).unwrap();
        // SAFETY: the caller drops the table before `region`.
        let keys = unsafe {
            mrs.register(
                PdHandle(1),
                region.as_mut_ptr(),
                region.len(),
                va,
                crate::mr::Access::LOCAL_WRITE,
            )
        }
        .unwrap();
        (mrs, keys.lkey)
    }

    /// A payload in registered memory goes out as its own pieces, read through the pin's
    /// pointer, with the ICRC computed over them; the datagram is the one the wire crate
    /// writes from a copy of the same bytes.
    #[test]
    fn a_payload_in_registered_memory_goes_as_pieces_with_its_icrc() {
        use crate::mr::PinFor;
        use crate::qp::Chunk;

        let mut region: Vec<u8> = (0..3000u32).map(|i| (i * 13 + 1) as u8).collect();
        let (mrs, lkey) = registered(&mut region, 0x10_000);
        // Two chunks, 7 + 1290 bytes: the payload needs 3 bytes of pad.
        let mut payload = Payload::None;
        let chunks = payload.set_memory(PdHandle(1), PinFor::Local);
        chunks.push(Chunk {
            key: lkey,
            va: 0x10_000 + 5,
            len: 7,
        });
        chunks.push(Chunk {
            key: lkey,
            va: 0x10_000 + 1001,
            len: 1290,
        });
        let tx = transmit(Opcode::RC_SEND_ONLY, payload, 7 + 1290);
        let mut out = Recorder::default();
        let mut e = Emitter::new(LOCAL, 4);
        assert_eq!(e.send(&[tx], &mrs, &mut out).unwrap(), 1);
        drop(mrs);
        let (pieces, sent) = &out.sent[0];
        assert_eq!(*pieces, 4, "headers, two chunks, trailer");
        let d = datagram(&tx);
        let mut whole = vec![0u8; d.buffer_len()];
        let n = d
            .emit(&mut whole, &[&region[5..12], &region[1001..2291]])
            .unwrap();
        let from = d.ip.header_len() + UDP_HEADER_LEN;
        assert_eq!(sent[..], whole[from..n]);
    }

    /// A transport that wants no ICRC (a lane's receiver checks none) gets the same datagrams
    /// with the ICRC left zero, whether the payload is inline or in registered memory.
    #[test]
    fn a_datagram_whose_icrc_is_not_wanted_goes_with_a_zero_one() {
        use crate::mr::PinFor;
        use crate::qp::Chunk;

        let mut region: Vec<u8> = (0..2000u32).map(|i| (i * 7 + 3) as u8).collect();
        let (mrs, lkey) = registered(&mut region, 0x20_000);
        let mut payload = Payload::None;
        payload.set_memory(PdHandle(1), PinFor::Local).push(Chunk {
            key: lkey,
            va: 0x20_000 + 10,
            len: 1501,
        });
        let mut bytes = [0u8; MAX_INLINE];
        bytes[..5].copy_from_slice(b"hello");
        let txs = [
            transmit(Opcode::RC_SEND_ONLY, payload, 1501),
            transmit(Opcode::RC_SEND_ONLY, Payload::Inline { bytes, len: 5 }, 5),
        ];
        let [mut with, mut without] = [false, true].map(|lane| Recorder {
            lane,
            ..Recorder::default()
        });
        for out in [&mut with, &mut without] {
            let mut e = Emitter::new(LOCAL, 4);
            assert_eq!(e.send(&txs, &mrs, out).unwrap(), 2);
        }
        drop(mrs);
        for (k, ((_, full), (_, bare))) in with.sent.iter().zip(&without.sent).enumerate() {
            let body = full.len() - ICRC_LEN;
            assert_eq!(bare.len(), full.len(), "packet {k}");
            assert_eq!(bare[..body], full[..body], "packet {k}: all but the ICRC");
            assert_eq!(bare[body..], [0; ICRC_LEN], "packet {k}");
            assert_ne!(
                full[body..],
                [0; ICRC_LEN],
                "packet {k}: computed when wanted"
            );
        }
        // And with its ICRC the first is what the wire crate writes.
        let d = datagram(&txs[0]);
        let mut whole = vec![0u8; d.buffer_len()];
        let n = d.emit(&mut whole, &[&region[10..1511]]).unwrap();
        assert_eq!(
            with.sent[0].1[..],
            whole[d.ip.header_len() + UDP_HEADER_LEN..n]
        );
    }

    /// A datagram for a socket leaves from the port the transport gives and carries its
    /// socket's IPv4 IDs; one for a lane (no ICRC wanted) names the QP's own port and its
    /// place in its run, and the transport is not asked for a port: no socket is opened or
    /// looked up for it.
    #[test]
    fn a_datagram_for_a_lane_asks_for_no_source_port() {
        let txs = [
            transmit(Opcode::RC_ACKNOWLEDGE, Payload::None, 0),
            transmit(Opcode::RC_ACKNOWLEDGE, Payload::None, 0),
        ];
        let mrs = MrTable::new(4, 1).unwrap();
        let mut udp = Recorder {
            sockets: true,
            ..Recorder::default()
        };
        assert_eq!(
            Emitter::new(LOCAL, 4).send(&txs, &mrs, &mut udp).unwrap(),
            2
        );
        assert_eq!(udp.ports, [(0xd000, 100), (0xd000, 101)]);
        assert_eq!(udp.asked, 1, "once for the QP's run of packets");
        let mut lane = Recorder {
            lane: true,
            sockets: true,
            ..Recorder::default()
        };
        assert_eq!(
            Emitter::new(LOCAL, 4).send(&txs, &mrs, &mut lane).unwrap(),
            2
        );
        assert_eq!(lane.ports, [(0xc000, 0), (0xc000, 0)]);
        assert_eq!(lane.asked, 0);
    }
}
