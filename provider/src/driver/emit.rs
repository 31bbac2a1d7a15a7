//! From the engine's [`Transmit`]s to datagrams on a [`Transport`]: the IP/UDP/BTH headers
//! written into reused scratch space, the payload pinned in registered memory and handed to
//! the transport as it is (no copy), the ICRC (IBTA A17.4.2) computed over the pinned bytes.
//! Packets the transport can send as one segmentation run (UDP GSO) are marked as such, and
//! their ICRCs cover the IPv4 Identification each will carry (see `runs.rs`).
//!
//! Nothing here allocates per packet: the scratch vectors keep their capacity from batch to
//! batch (the per-batch vectors of borrowed pieces are recycled through an empty `'static`
//! vector of the same layout).

use std::io;
use std::net::{IpAddr, SocketAddr};

use softrnic_wire::frame::{DatagramRepr, IpHeader, UdpHeader, UDP_HEADER_LEN};
use softrnic_wire::roce::pad_len;
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::runs::{Idents, Runs};
use crate::mr::{MrTable, PinError, ReadPin};
use crate::rc::{Payload, Transmit};
use crate::transport::{OutPacket, Transport, HOP_LIMIT};

/// Room for IPv6 + UDP + BTH + the largest extension headers.
const HEADER_ROOM: usize = 128;

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
    headers: Vec<[u8; HEADER_ROOM]>,
    trailers: Vec<[u8; 8]>,
    spans: Vec<Span>,
    pins: Spare<ReadPin<'static>>,
    pieces: Vec<&'static [u8]>,
    pkts: Vec<OutPacket<'static>>,
    /// (packet index, first piece, piece count) of each packet that goes out.
    outs: Vec<(usize, usize, usize)>,
    idents: Idents,
    stats: EmitStats,
}

/// Where packet `i` of a batch lies in the scratch space.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    /// BTH start and headers end in `headers[i]`.
    h0: usize,
    h1: usize,
    /// Trailer (pad + ICRC) length in `trailers[i]`.
    t: usize,
    /// Its pins: `pins[p0..p1]`.
    p0: usize,
    p1: usize,
    /// Its place in its segmentation run.
    segment: u16,
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
            headers: vec![[0; HEADER_ROOM]; batch],
            trailers: vec![[0; 8]; batch],
            spans: Vec::with_capacity(batch),
            pins: Spare(Vec::with_capacity(batch * 2)),
            pieces: Vec::with_capacity(batch * 4),
            pkts: Vec::with_capacity(batch),
            outs: Vec::with_capacity(batch),
            idents: Idents::default(),
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
        let mut pieces: Vec<&[u8]> = recycle(std::mem::take(&mut self.pieces));
        let mut pkts: Vec<OutPacket<'_>> = recycle(std::mem::take(&mut self.pkts));
        self.outs.clear();
        self.spans.clear();
        let mut runs = Runs::new(transport.segment_limits());
        self.idents.clear();
        // Pass 1: headers, pins and ICRCs, into scratch space.
        for (i, tx) in txs.iter().enumerate() {
            let p0 = pins.len();
            let segment = runs.place(tx.src_port, tx.dst, tx.roce.buffer_len(), pieces_of(tx));
            let ident = self.idents.next(tx.src_port, segment, transport);
            let mut span = Span {
                p0,
                ..Span::default()
            };
            match pin_payload(tx, mrs, &mut pins, i == 0) {
                Ok(()) => match self.build(i, tx, &pins[p0..], ident) {
                    Ok((h0, h1, t)) => {
                        span = Span {
                            h0,
                            h1,
                            t,
                            p0,
                            p1: pins.len(),
                            segment,
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
                self.idents.drop_last(tx.src_port, segment);
            }
            pins.truncate(span.p1.max(p0));
            self.spans.push(span);
        }
        let taken = self.spans.len();
        // Pass 2: the piece lists (scratch space no longer changes).
        for (i, (tx, s)) in txs.iter().zip(&self.spans).enumerate() {
            if !s.ok {
                continue;
            }
            let first = pieces.len();
            pieces.push(&self.headers[i][s.h0..s.h1]);
            match &tx.payload {
                Payload::None => {}
                Payload::Inline { bytes, len } => pieces.push(&bytes[..*len as usize]),
                Payload::Memory(_) => pieces.extend(pins[s.p0..s.p1].iter().map(|p| &p[..])),
            }
            pieces.push(&self.trailers[i][..s.t]);
            self.outs.push((i, first, pieces.len() - first));
        }
        for &(i, first, n) in &self.outs {
            pkts.push(OutPacket {
                dst: SocketAddr::new(txs[i].dst, ROCE_V2_UDP_PORT),
                src_port: txs[i].src_port,
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

    /// Writes packet `i`'s headers and trailer, for the IPv4 Identification `ident` it will
    /// carry (see [`Idents`]); returns (BTH start, headers end, trailer len).
    fn build(
        &mut self,
        i: usize,
        tx: &Transmit,
        payload: &[ReadPin<'_>],
        ident: u16,
    ) -> Result<(usize, usize, usize), ()> {
        let ip = IpHeader::udp_socket(self.local, tx.dst, HOP_LIMIT)
            .ok_or(())?
            .with_ident(ident);
        let d = DatagramRepr {
            ip,
            udp: UdpHeader {
                src_port: tx.src_port,
                dst_port: ROCE_V2_UDP_PORT,
                checksum: 0,
            },
            roce: tx.roce,
        };
        let buf = &mut self.headers[i];
        // Only the ICRC reads the IP header: the transport sends from the BTH on.
        let n = d.emit_headers_for_icrc(buf).map_err(drop)?;
        let icrc = match &tx.payload {
            Payload::None => d.icrc(&buf[..n], &[]),
            Payload::Inline { bytes, len } => d.icrc(&buf[..n], &[&bytes[..*len as usize]]),
            Payload::Memory(_) => {
                let mut parts: [&[u8]; crate::rc::MAX_SGE] = [&[]; crate::rc::MAX_SGE];
                for (k, p) in payload.iter().enumerate() {
                    parts[k] = p;
                }
                d.icrc(&buf[..n], &parts[..payload.len()])
            }
        }
        .map_err(drop)?;
        let pad = pad_len(tx.roce.payload_len);
        let t = &mut self.trailers[i];
        t[..pad].fill(0);
        t[pad..pad + 4].copy_from_slice(&icrc.to_le_bytes());
        Ok((d.ip.header_len() + UDP_HEADER_LEN, n, pad + 4))
    }
}

/// How many pieces `tx` goes out in: headers, payload, trailer.
fn pieces_of(tx: &Transmit) -> usize {
    2 + match &tx.payload {
        Payload::None => 0,
        Payload::Inline { .. } => 1,
        Payload::Memory(chunks) => chunks.as_slice().len(),
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
