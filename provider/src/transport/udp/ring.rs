//! Receiving through a packet ring: the device's IPv4 RoCEv2 datagrams read from memory the
//! kernel shares with it (`AF_PACKET`, `PACKET_RX_RING`, `TPACKET_V2`), with no system call.
//!
//! A busy poller over the receive socket makes one `recvfrom` per datagram and more for the
//! empty looks between them, and on loopback that kernel work is most of a small RC round trip
//! (each hop brings the answer and the ACK of the message that went the other way). A packet
//! socket with a receive ring is handed every frame by the kernel as it arrives, before the
//! IP layer: the kernel copies the frame into the next slot of the ring and marks the slot
//! the user's (`TP_STATUS_USER`); the poller reads the mark, takes the datagram and gives the
//! slot back (`TP_STATUS_KERNEL`). An empty poll is one read of shared memory.
//!
//! * **Which frames**: a classic BPF filter on the socket keeps the IPv4 datagrams to
//!   `(local address, 4791)` that are not fragments (RoCEv2 packets carry DF and are never
//!   fragmented; a fragment is dropped here). On a device the host's processes share
//!   (`host/`), only those whose BTH DestQP is in the process's QPN block, the ones the
//!   kernel steers to its socket: a process never reads another's packets. The filter
//!   reads from the IP header on (`SKF_NET_OFF`) and the frame says where it starts,
//!   whatever the link header before it (the socket is `SOCK_RAW`, which the virtio header
//!   below needs). It listens on every
//!   interface: datagrams from this host come over `lo` whatever the address, others over
//!   the interface that has it.
//! * **The receive socket stays bound** to `(local, 4791)`: it holds the port (no other
//!   device or rxe takes it) and keeps the kernel from answering every datagram with an ICMP
//!   port unreachable. A filter on it drops what the ring has (the kernel counts those as UDP
//!   receive errors in `netstat -su`) and keeps only the long runs below.
//! * **The IP header is seen**, so every IPv4 ICRC is checked exactly (over the IP ID the
//!   sender used), where the socket path must solve for it.
//! * **Who may**: a packet socket needs `CAP_NET_RAW`. [`RxRing::open`] fails without it and
//!   the transport receives from its socket as before. So does a kernel older than 6.2: its
//!   virtio header has no type for a UDP segmentation run, and it drops a run on its way to a
//!   ring (see [`takes_runs`]). IPv6 devices always do (not built yet: the filter and the
//!   header walk are IPv4's).
//! * **Segmentation runs**: a run sent with UDP GSO from this host (`udp/send.rs`) crosses
//!   `lo` (or a veth) whole, and the kernel cuts it only at the UDP socket, after the ring has
//!   seen it. The ring asks for a virtio header before each frame (`PACKET_VNET_HDR`), which
//!   says whether the frame is a run and its segment size, and cuts it as the kernel would:
//!   segment `k` is the next `gso_size` bytes of the payload. Only the first one's IPv4
//!   header is certain (see `Datagram::segment`); the others' ICRCs are checked over it for
//!   the Identification that makes them match, as the socket path checks them.
//! * **Long runs go through the socket**: a slot holds [`RING_UDP_MAX`] bytes of UDP
//!   datagram, a whole RoCEv2 packet of the largest path MTU and short runs (an answer and
//!   its ACK), but not the 64 KiB runs of a bulk WRITE. For a longer one the ring keeps only
//!   the headers, a notice; the socket, the one place that keeps it (its filter takes exactly
//!   the datagrams longer than the ring's), receives it whole (`UDP_GRO`: the kernel does not
//!   cut it) and [`LongRuns`] cuts it into the caller's slots by the segment size the kernel
//!   gives with it. The socket is read only while the ring has noticed a long run not yet
//!   read, so a busy poller's empty look stays a read of shared memory. The IP header of
//!   such a run is not seen: its segments get the notice's Identification (plus their place)
//!   as a guess, checked at once when right, else solved for as on the socket path.
//! * **No allocation per packet**: the ring is mapped once; a datagram is copied from its slot
//!   into the caller's [`RecvBatch`] slot (the copy `recvfrom` would make) and the ring slot
//!   is given back at once.
//!
//! A full ring drops frames (the kernel counts them); RC recovers them as it recovers any loss.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use softrnic_wire::ROCE_V2_UDP_PORT;

use super::super::{RecvBatch, RecvMeta};
use super::long_runs::LongRuns;
use crate::host::block::{QpnBlock, BLOCK_BITS};

/// Bytes per ring slot: the slot header and a datagram of up to [`RING_UDP_MAX`] bytes.
const FRAME_LEN: usize = 8192;
/// Bytes per ring block (a page multiple; slots do not cross blocks).
const BLOCK_LEN: usize = 1 << 16;
/// Blocks in the ring: 8 slots each, 512 in all, 4 MiB.
const BLOCKS: usize = 64;
/// The longest UDP datagram (header included) a slot takes whole, with room before it for
/// the slot header, the virtio header, a link header and IPv4 with options; longer ones go
/// through the socket (see the module comment).
pub(super) const RING_UDP_MAX: usize = FRAME_LEN - 256;
/// What the ring keeps of a longer one: link, IP and UDP headers.
const NOTICE_SNAP: u32 = 160;
const FRAMES_PER_BLOCK: usize = BLOCK_LEN / FRAME_LEN;
const FRAMES: usize = FRAMES_PER_BLOCK * BLOCKS;

/// `TPACKET_V2` (`enum tpacket_versions`).
const TPACKET_V2: libc::c_int = 1;
/// Where the slot's `sockaddr_ll` starts: after the slot header, aligned.
const SLL_AT: usize = (std::mem::size_of::<libc::tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1)
    & !(libc::TPACKET_ALIGNMENT - 1);

/// A packet socket's receive ring (see the module comment).
pub(super) struct RxRing {
    fd: OwnedFd,
    map: MmapRaw,
    /// The slot to look at next.
    next: usize,
    /// The segments of that slot's run already taken (see [`RxRing::recv`]).
    taken: usize,
    /// The runs too long for a slot, read from the socket.
    long: LongRuns,
    local: Ipv4Addr,
    /// Frames the kernel found no free slot for, counted so far (see [`RxRing::dropped`]).
    dropped: AtomicU64,
}

impl std::fmt::Debug for RxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxRing")
            .field("local", &self.local)
            .field("next", &self.next)
            .finish()
    }
}

impl RxRing {
    /// A ring that receives the datagrams to `(local, 4791)`, only those to the QPs of
    /// `block` if one is given (a device the host's processes share, `host/steer.rs`).
    ///
    /// # Errors
    /// `PermissionDenied` without `CAP_NET_RAW`; other socket or `mmap` errors.
    pub(super) fn open(local: Ipv4Addr, block: Option<QpnBlock>) -> io::Result<RxRing> {
        // Protocol 0: the socket receives nothing until the bind below names IPv4, once the
        // filter and the ring are in place.
        // SAFETY: a plain socket call; the result is checked before it is owned.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        attach_filter(fd.as_raw_fd(), &ring_filter(local, block))?;
        set_option(&fd, libc::PACKET_VERSION, &TPACKET_V2)?;
        set_option(&fd, libc::PACKET_VNET_HDR, &1 as &libc::c_int)?;
        let req = libc::tpacket_req {
            tp_block_size: BLOCK_LEN as u32,
            tp_block_nr: BLOCKS as u32,
            tp_frame_size: FRAME_LEN as u32,
            tp_frame_nr: FRAMES as u32,
        };
        set_option(&fd, libc::PACKET_RX_RING, &req)?;
        let map = MmapOptions::new()
            .len(BLOCK_LEN * BLOCKS)
            .map_raw(fd.as_raw_fd())?;
        // SAFETY: all-zero is a valid sockaddr_ll; the fields the bind reads are set.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_IP as u16).to_be();
        sll.sll_ifindex = 0; // every interface
                             // SAFETY: `sll` is a valid sockaddr_ll of the length passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing {
            fd,
            map,
            next: 0,
            taken: 0,
            long: LongRuns::new(),
            local,
            dropped: AtomicU64::new(0),
        })
    }

    /// The frames dropped because the ring was full, since it was opened: the kernel counts
    /// them (`PACKET_STATISTICS`'s `tp_drops`, which reading resets) and they reached
    /// neither the ring nor the receive socket, whose filter leaves the ring's datagrams to
    /// it. RC recovers them as any loss; a count that grows says the ring is too small for
    /// the bursts it gets (`docs/performance.md`, "An open problem: the ring's size").
    pub(super) fn dropped(&self) -> u64 {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is a valid tpacket_stats of the length passed, alive during the call.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&raw mut st).cast(),
                &mut len,
            )
        };
        let new = if r == 0 { u64::from(st.tp_drops) } else { 0 };
        self.dropped.fetch_add(new, Ordering::Relaxed) + new
    }

    /// The packet socket, for `ppoll` (readable while a slot is the user's).
    pub(super) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Takes up to `cap` datagrams into `batch`'s slots from `first` on, from the ring and,
    /// for the long runs it noticed, from the receive socket `socket`; returns how many.
    /// Frames that are not a well-formed datagram to the device (the filter lets through
    /// nothing else, so only a damaged one) are given back unread. A run's segments each take
    /// a slot; what does not fit stays for the next call, which goes on from there. A long
    /// run's segments fill as many slots as the batch has, whatever `cap`: the run is read
    /// whole by one system call anyway, and a segment left over is a copy (see
    /// `long_runs.rs`), where the pacing behind `cap` is about system calls.
    ///
    /// # Errors
    /// The socket's, other than "would block"; what was received stays in the ring.
    pub(super) fn recv(
        &mut self,
        socket: RawFd,
        batch: &mut RecvBatch,
        first: usize,
        cap: usize,
    ) -> io::Result<usize> {
        let local = IpAddr::V4(self.local);
        let cap = cap.min(batch.capacity().saturating_sub(first));
        let mut got = 0;
        loop {
            // A run the ring noticed comes before the frames behind its notice: datagrams
            // keep their order (an RC responder takes a packet out of order for a lost one).
            if self.long.pending() {
                let room = batch.capacity().saturating_sub(first + got);
                got += self.long.recv(socket, local, batch, first + got, room)?;
                if self.long.pending() {
                    return Ok(got); // not all there yet, or no room left
                }
            }
            let (n, noticed) = self.take_frames(batch, first + got, cap.saturating_sub(got));
            got += n;
            let Some(ident) = noticed else {
                return Ok(got);
            };
            self.long.noticed(ident);
        }
    }

    /// Takes datagrams from the ring into `batch`'s slots from `first` on, up to `cap` and up
    /// to the first notice of a long run (whose headers are the frame's): (how many, the
    /// noticed run's IPv4 Identification if it stopped at a notice).
    fn take_frames(
        &mut self,
        batch: &mut RecvBatch,
        first: usize,
        cap: usize,
    ) -> (usize, Option<u16>) {
        let local = IpAddr::V4(self.local);
        let mut got = 0;
        let mut slots = batch.slots_mut().skip(first).take(cap).peekable();
        while slots.peek().is_some() {
            let mut taken = self.taken;
            let Some(frame) = self.ready() else { break };
            let mut done = true;
            let mut long = None;
            match frame.datagram() {
                Some(Seen::Datagram(d)) => {
                    let segments = d.segments();
                    while taken < segments {
                        let Some((buf, meta)) = slots.next() else {
                            done = false;
                            break;
                        };
                        let (ip, certain, payload) = d.segment(taken);
                        fill_slot((buf, meta), payload, d.cut, d.src, local);
                        let ip = &ip[..d.ip_header.len()];
                        if certain {
                            meta.set_ip_header(ip);
                        } else {
                            meta.set_ip_header_ident_unknown(ip);
                        }
                        got += 1;
                        taken += 1;
                    }
                }
                Some(Seen::Long { ident }) => long = Some(ident),
                None => {}
            }
            if !done {
                self.taken = taken; // the rest of the run next time
                break;
            }
            frame.release();
            self.taken = 0;
            self.next = (self.next + 1) % FRAMES;
            if long.is_some() {
                return (got, long);
            }
        }
        (got, None)
    }

    /// The next slot, if the kernel has handed it over.
    fn ready(&self) -> Option<Frame<'_>> {
        let at =
            (self.next / FRAMES_PER_BLOCK) * BLOCK_LEN + (self.next % FRAMES_PER_BLOCK) * FRAME_LEN;
        // SAFETY: `at + FRAME_LEN` is inside the mapping (slot `next` < FRAMES of its block).
        // The kernel writes a slot only while its status says it is the kernel's; once the
        // status (read with Acquire, pairing with the kernel's barrier before it sets the
        // status) says it is the user's, the slot is ours until we give it back, and the
        // status word is only ever accessed atomically.
        unsafe {
            let base = self.map.as_mut_ptr().add(at);
            let status = &*(base as *const AtomicU32);
            if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return None;
            }
            let bytes = std::slice::from_raw_parts(base.cast_const(), FRAME_LEN);
            Some(Frame { status, bytes })
        }
    }
}

/// A slot the kernel handed over.
struct Frame<'a> {
    status: &'a AtomicU32,
    bytes: &'a [u8],
}

/// Whether the running kernel hands a packet ring a UDP segmentation run (with
/// `VIRTIO_NET_HDR_GSO_UDP_L4` in its virtio header): Linux 6.2 and later. An older one drops
/// the frame, and a ring there would lose every short run (the socket drops them too). A
/// release this cannot read counts as older: the socket path is always safe.
pub(super) fn takes_runs() -> bool {
    // SAFETY: all-zero is a valid utsname, which uname fills.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname to write.
    if unsafe { libc::uname(&mut u) } != 0 {
        return false;
    }
    let release: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    release_at_least(&release, (6, 2))
}

/// Whether a kernel release string (`6.18.44-...`) is `want` (major, minor) or later.
fn release_at_least(release: &[u8], want: (u32, u32)) -> bool {
    let text = String::from_utf8_lossy(release);
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
    match (next(), next()) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// Puts a received datagram into a batch slot: `payload` (cut to the slot, and marked so; or
/// already cut, `cut`), from `src` to `dst`. The IP header is the caller's to set.
pub(super) fn fill_slot(
    (buf, meta): (&mut [u8], &mut RecvMeta),
    payload: &[u8],
    cut: bool,
    src: SocketAddr,
    dst: IpAddr,
) {
    let n = payload.len().min(buf.len());
    buf[..n].copy_from_slice(&payload[..n]);
    meta.len = n;
    meta.truncated = cut || n < payload.len();
    meta.src = src;
    meta.dst = dst;
}

/// What a slot holds.
enum Seen<'a> {
    /// A datagram, or a run of them, to the device.
    Datagram(Datagram<'a>),
    /// The headers of one longer than a slot, which the socket keeps: its (first segment's)
    /// IPv4 Identification.
    Long { ident: u16 },
}

/// What a frame carries, when it is a datagram (or a run of them) to the device.
struct Datagram<'a> {
    src: SocketAddr,
    ip_header: &'a [u8],
    /// The UDP payload: whole segments only, as far as the frame holds them.
    payload: &'a [u8],
    /// The segment size of a run; the payload's length for a lone datagram.
    segment: usize,
    /// A lone datagram the slot could not hold whole.
    cut: bool,
}

impl<'a> Datagram<'a> {
    /// How many datagrams it is: 1, or a run's segments (the last may be shorter).
    fn segments(&self) -> usize {
        self.payload.len().div_ceil(self.segment).max(1)
    }

    /// Segment `k`: its payload, its IPv4 header (with its own total length; the checksum is
    /// left, as the ICRC does not cover it), and whether that header is certain. A lone
    /// datagram's and a run's first segment's are. A later segment's Identification is the
    /// first one's `+ k` when the run was cut by a sender's GSO, but receive offload (GRO) may
    /// also have joined segments of other Identifications: its header says `+ k` and is
    /// marked uncertain, so that its ICRC is checked for whichever ID makes it match.
    fn segment(&self, k: usize) -> ([u8; 60], bool, &'a [u8]) {
        let from = k * self.segment;
        let payload = &self.payload[from..(from + self.segment).min(self.payload.len())];
        let mut ip = [0u8; 60];
        let h = self.ip_header.len();
        ip[..h].copy_from_slice(self.ip_header);
        let total = (h + 8 + payload.len()) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        if k > 0 {
            let first = u16::from_be_bytes([ip[4], ip[5]]);
            ip[4..6].copy_from_slice(&first.wrapping_add(k as u16).to_be_bytes());
        }
        (ip, k == 0, payload)
    }
}

impl Frame<'_> {
    /// Gives the slot back to the kernel.
    fn release(self) {
        self.status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// The slot header's field at `at`, in host order.
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_ne_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = &self.bytes[at..at + 4];
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The datagram in the slot, checked again (the filter is the kernel's, the frame is
    /// shared memory): a host-bound IPv4 UDP datagram or run whose headers fit.
    fn datagram(&self) -> Option<Seen<'_>> {
        use std::mem::offset_of;
        // The packet's length, what the slot holds of it, and where its IP header starts.
        let len = self.u32_at(offset_of!(libc::tpacket2_hdr, tp_len)) as usize;
        let snaplen = self.u32_at(offset_of!(libc::tpacket2_hdr, tp_snaplen)) as usize;
        let net = usize::from(self.u16_at(offset_of!(libc::tpacket2_hdr, tp_net)));
        let mac = usize::from(self.u16_at(offset_of!(libc::tpacket2_hdr, tp_mac)));
        // For this host, not one seen only because the interface is promiscuous.
        let pkttype = self.bytes[SLL_AT + offset_of!(libc::sockaddr_ll, sll_pkttype)];
        // The virtio header just before the frame (link header included): segmentation type
        // and size (little-endian, as the kernel writes it for packet sockets on this CPU).
        let vnet = self.bytes.get(mac.checked_sub(VNET_HDR_LEN)?..mac)?;
        let (gso_type, gso_size) = (vnet[1], usize::from(u16::from_le_bytes([vnet[4], vnet[5]])));
        if pkttype != libc::PACKET_HOST || snaplen > len || net < mac {
            return None;
        }
        let pkt = self.bytes.get(net..mac.checked_add(snaplen)?)?;
        let len = len.checked_sub(net - mac)?; // from the IP header on
        let ihl = usize::from(pkt.first()? & 0x0f) * 4;
        let ip = pkt.get(..ihl)?;
        let udp = pkt.get(ihl..ihl + 8)?;
        if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != libc::IPPROTO_UDP as u8 {
            return None;
        }
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        if u16::from_be_bytes([udp[2], udp[3]]) != ROCE_V2_UDP_PORT
            || udp_len < 8
            || ihl + udp_len > total
            || total > len
        {
            return None;
        }
        if udp_len > RING_UDP_MAX {
            return Some(Seen::Long {
                ident: u16::from_be_bytes([ip[4], ip[5]]),
            });
        }
        let whole = udp_len - 8;
        let held = (pkt.len() - ihl - 8).min(whole);
        let (segment, held) = match gso_type {
            VIRTIO_NET_HDR_GSO_NONE => (whole, held),
            // A run the slot holds whole may end with a shorter segment; of a cut one, the
            // whole segments are kept (none: nothing of it is usable).
            VIRTIO_NET_HDR_GSO_UDP_L4 if gso_size > 0 && held == whole => (gso_size, held),
            VIRTIO_NET_HDR_GSO_UDP_L4 if gso_size > 0 && held >= gso_size => {
                (gso_size, held - held % gso_size)
            }
            _ => return None,
        };
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        Some(Seen::Datagram(Datagram {
            src: SocketAddr::new(IpAddr::V4(src), u16::from_be_bytes([udp[0], udp[1]])),
            ip_header: ip,
            payload: &pkt[ihl + 8..ihl + 8 + held],
            segment: segment.max(1),
            // A lone datagram longer than the slot arrives cut, as from a socket.
            cut: held < whole && gso_type == VIRTIO_NET_HDR_GSO_NONE,
        }))
    }
}

/// `struct virtio_net_hdr`'s size, and its segmentation types used here.
const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

/// A classic BPF program: keep IPv4, to `local`, UDP, not a fragment, to port 4791, whole if
/// it fits a slot, else its headers. Offsets are from the IP header (`SKF_NET_OFF`),
/// whatever the link header before it.
fn ring_filter(local: Ipv4Addr, block: Option<QpnBlock>) -> Vec<libc::sock_filter> {
    use crate::bpf::*;
    /// `SKF_NET_OFF`: a load at this offset plus `k` reads the network header's byte `k`.
    const NET: u32 = (-0x10_0000i32) as u32;
    let mut program = vec![
        op(LD_B_ABS, 0, 0, NET),                      // 0: version, IHL
        op(AND_K, 0, 0, 0xf0),                        // 1
        op(JEQ_K, 0, 9, 0x40),                        // 2: IPv4, else drop
        op(LD_W_ABS, 0, 0, NET + 16),                 // 3: destination address
        op(JEQ_K, 0, 7, u32::from(local)),            // 4
        op(LD_B_ABS, 0, 0, NET + 9),                  // 5: protocol
        op(JEQ_K, 0, 5, libc::IPPROTO_UDP as u32),    // 6
        op(LD_H_ABS, 0, 0, NET + 6),                  // 7: flags, fragment offset
        op(JSET_K, 3, 0, 0x3fff),                     // 8: MF or an offset: drop
        op(LDX_MSH, 0, 0, NET),                       // 9: x = IP header length
        op(LD_H_IND, 0, 0, NET + 2),                  // 10: UDP destination port
        op(JEQ_K, 1, 0, u32::from(ROCE_V2_UDP_PORT)), // 11
        op(RET_K, 0, 0, 0),                           // 12: drop
    ];
    if let Some(block) = block {
        // Only the datagrams the kernel steers to this process's socket (`host/steer.rs`):
        // the BTH's DestQP (UDP payload bytes 5..8) in `block`. A datagram too short for a
        // BTH ends the program at the load, dropped.
        program.extend([
            op(LD_W_IND, 0, 0, NET + 8 + 4),     // reserved byte, DestQP
            op(AND_K, 0, 0, 0x00ff_ffff),        // DestQP
            op(RSH_K, 0, 0, BLOCK_BITS),         // its block
            op(JEQ_K, 1, 0, u32::from(block.0)), // this process's: on
            op(RET_K, 0, 0, 0),                  // another's: drop
        ]);
    }
    program.extend([
        op(LD_H_IND, 0, 0, NET + 4),          // UDP length
        op(JGT_K, 1, 0, RING_UDP_MAX as u32), //
        op(RET_K, 0, 0, u32::MAX),            // keep all of it
        op(RET_K, 0, 0, NOTICE_SNAP),         // a long one: its headers
    ]);
    program
}

/// Attaches a classic BPF program to socket `fd` as its filter.
pub(super) fn attach_filter(fd: RawFd, program: &[libc::sock_filter]) -> io::Result<()> {
    crate::bpf::attach(fd, libc::SO_ATTACH_FILTER, program)
}

/// The receive socket's filter while the ring receives: keep the datagrams longer than the
/// ring's (`len` is the UDP datagram's, header included), drop the others.
pub(super) fn longer_than_the_ring() -> [libc::sock_filter; 4] {
    use crate::bpf::*;
    [
        op(LD_W_LEN, 0, 0, 0),
        op(JGT_K, 0, 1, RING_UDP_MAX as u32),
        op(RET_K, 0, 0, u32::MAX), // keep
        op(RET_K, 0, 0, 0),        // drop
    ]
}

/// `setsockopt(SOL_PACKET, name, value)`.
fn set_option<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a valid T of the size passed, alive during the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::release_at_least;

    #[test]
    fn kernel_releases_from_6_2_on_take_runs() {
        for (release, takes) in [
            ("6.18.44-fc-v595", true),
            ("6.2.0", true),
            ("7.0-rc1", true),
            ("6.1.0-50-amd64", false),
            ("5.15.0-91-generic", false),
            ("garbage", false),
            ("", false),
        ] {
            assert_eq!(
                release_at_least(release.as_bytes(), (6, 2)),
                takes,
                "{release}"
            );
        }
    }
}
