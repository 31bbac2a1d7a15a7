//! A userspace link between two interfaces: every frame one receives is sent out of the
//! other, through two `AF_PACKET` sockets, in a namespace of its own between two veth pairs
//! (`testbed/relay_link.sh`). It stands where a switch or an impairment box would (this
//! kernel has no `sch_netem`), so a transfer crosses a hop that is not the kernel's own
//! forwarding.
//!
//! * **Segmentation runs** cross a veth whole (a UDP GSO send is cut only where it leaves the
//!   host). With `--vnet` (the default) both sockets carry a virtio header
//!   (`PACKET_VNET_HDR`), so a run is received whole with its segment size and sent on as
//!   the same run, as a bridge forwards it. With `--no-vnet` a run arrives as one frame
//!   longer than the MTU with nothing saying it is a run; the kernel refuses to send it
//!   (`EMSGSIZE`) and it is counted as dropped: a link that loses every run.
//! * **Impairments** (`--loss P`, `--dup P`, `--reorder P`, `--corrupt P`, each a probability
//!   per frame, drawn from a SplitMix64 seeded with `--seed N`): a lost frame is not sent on,
//!   a duplicated one is sent twice, a reordered one is held and sent after the next frame
//!   the same way (or after 1 ms if none comes), a corrupted one has one bit of its UDP
//!   payload flipped (an IPv4 UDP frame with a payload; RoCEv2 sends UDP checksum 0, so
//!   only the ICRC can tell). `--down-at S --down-for D`: every frame is lost from S
//!   seconds after the start for D seconds, a link down and up again (the kernel's own link
//!   down, `ip link set down`, lasts longer than asked: a carrier coming back waits for
//!   linkwatch). `--delay MS` holds every frame that is sent on for MS milliseconds (a
//!   fraction allowed), `--jitter MS` for a further uniform 0..MS drawn per frame: a wire's
//!   latency. The frames wait in a bounded queue per direction (a byte ring allocated once,
//!   a frame that finds it full is counted as not sent); without jitter they keep their
//!   order, with it a frame may overtake one that drew a longer wait. Per frame: with
//!   offloads off at both ends
//!   (`OFFLOAD_OFF` in `relay_link.sh`) a frame is one packet, as on a wire.
//! * **Counters**: frames and bytes each way, the frames that could not be sent, and those
//!   lost, duplicated and reordered, printed on `SIGINT`/`SIGTERM` (and every `--every`
//!   seconds when given).
//!
//! usage: packet-relay IF_A IF_B [--no-vnet] [--every SECONDS] [--loss P] [--dup P]
//!        [--reorder P] [--corrupt P] [--seed N] [--down-at SECS --down-for SECS]
//!        [--delay MS [--jitter MS]]

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use softrnic_provider::transport::SplitMix64;

/// Set by the signal handler: print the counters and stop.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// One direction's counters.
#[derive(Default)]
struct Counts {
    frames: u64,
    bytes: u64,
    runs: u64,
    dropped: u64,
    lost: u64,
    duplicated: u64,
    reordered: u64,
    corrupted: u64,
}

/// The impairments of the link: probabilities per frame.
#[derive(Default, Clone, Copy)]
struct Impair {
    loss: f64,
    dup: f64,
    reorder: f64,
    corrupt: f64,
    /// The link is down (every frame lost) from this long after the start, for `down_for`.
    down_at: Option<Duration>,
    down_for: Duration,
    /// Every frame sent on waits this long first ...
    delay: Duration,
    /// ... and a further uniform `0..=jitter`.
    jitter: Duration,
}

/// When the relay started: `--down-at` counts from it.
static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

impl Impair {
    /// Whether the link is down now.
    fn is_down(&self) -> bool {
        self.down_at.is_some_and(|at| {
            let t = START.get_or_init(Instant::now).elapsed();
            t >= at && t < at + self.down_for
        })
    }
}

/// How long a reordered frame waits for a frame to go ahead of it.
const HOLD: Duration = Duration::from_millis(1);

/// The bytes a direction's delay line holds: the frames of a few milliseconds at the rates
/// this link carries (a few hundred MB/s), with room for longer delays.
const DELAY_BYTES: usize = 16 << 20;

/// The frames a direction's delay line holds.
const DELAY_FRAMES: usize = 1 << 16;

/// A frame in a [`DelayLine`]: where its bytes are in the ring, and when it is due.
struct Delayed {
    at: usize,
    len: usize,
    due: Instant,
    sent: bool,
}

/// The frames waiting out `--delay` (and `--jitter`): their bytes in one ring allocated
/// once, their places in a queue of bounded length in arrival order. A frame's bytes are
/// contiguous (one that does not fit before the end of the ring starts again at its
/// beginning); the space is reclaimed from the front as the oldest frames go, so with
/// jitter a frame sent early holds its space until those before it have gone too.
struct DelayLine {
    ring: Vec<u8>,
    frames: std::collections::VecDeque<Delayed>,
    /// Where the next frame's bytes go.
    tail: usize,
}

impl DelayLine {
    fn new() -> Self {
        Self {
            ring: vec![0; DELAY_BYTES],
            frames: std::collections::VecDeque::with_capacity(DELAY_FRAMES),
            tail: 0,
        }
    }

    /// Where `len` bytes fit, if they do: at the tail, or at the start of the ring.
    fn room(&self, len: usize) -> Option<usize> {
        let Some(head) = self.frames.front().map(|f| f.at) else {
            return (len <= self.ring.len()).then_some(0);
        };
        if self.frames.len() == DELAY_FRAMES {
            return None;
        }
        if self.tail > head {
            // Free: tail..end, then 0..head.
            if self.ring.len() - self.tail >= len {
                Some(self.tail)
            } else {
                (head > len).then_some(0)
            }
        } else {
            // Free: tail..head (strictly less, so that a full ring is not an empty one).
            (head - self.tail > len).then_some(self.tail)
        }
    }

    /// Queues `frame` to go at `due`; false if there is no room.
    fn push(&mut self, frame: &[u8], due: Instant) -> bool {
        let Some(at) = self.room(frame.len()) else {
            return false;
        };
        self.ring[at..at + frame.len()].copy_from_slice(frame);
        self.tail = at + frame.len();
        self.frames.push_back(Delayed {
            at,
            len: frame.len(),
            due,
            sent: false,
        });
        true
    }

    /// Hands `out` the frames due at `now` (in the order they came), and frees the space of
    /// those gone from the front.
    fn release(&mut self, now: Instant, mut out: impl FnMut(&[u8])) {
        for f in self.frames.iter_mut().filter(|f| !f.sent && f.due <= now) {
            f.sent = true;
            out(&self.ring[f.at..f.at + f.len]);
        }
        while self.frames.front().is_some_and(|f| f.sent) {
            self.frames.pop_front();
        }
        if self.frames.is_empty() {
            self.tail = 0;
        }
    }

    /// The earliest time a waiting frame is due.
    fn next_due(&self) -> Option<Instant> {
        self.frames.iter().filter(|f| !f.sent).map(|f| f.due).min()
    }
}

/// One direction of the link: its socket out, the frame held back for reordering, and the
/// frames waiting out the delay.
struct Direction {
    to: libc::c_int,
    held: Option<(Vec<u8>, Instant)>,
    delay: Option<DelayLine>,
}

impl Direction {
    /// Sends `frame` on, now or after the delay drawn for it; counts a failure.
    fn send(&mut self, frame: &[u8], impair: Impair, rng: &mut SplitMix64, c: &mut Counts) {
        let Some(line) = self.delay.as_mut() else {
            return send(self.to, frame, c);
        };
        let mut wait = impair.delay;
        if !impair.jitter.is_zero() {
            wait += Duration::from_nanos(rng.below(impair.jitter.as_nanos() as u64 + 1));
        }
        if !line.push(frame, Instant::now() + wait) {
            c.dropped += 1;
        }
    }

    /// Sends the delayed frames that are due (those due at the same wake-up in the order
    /// they came).
    fn release_due(&mut self, c: &mut Counts) {
        let Some(line) = self.delay.as_mut() else {
            return;
        };
        let to = self.to;
        line.release(Instant::now(), |f| send(to, f, c));
    }

    /// Relays `frame` (`head` bytes of virtio header before it) with the impairments drawn
    /// from `rng`.
    fn relay(
        &mut self,
        frame: &mut [u8],
        head: usize,
        impair: Impair,
        rng: &mut SplitMix64,
        c: &mut Counts,
    ) {
        if rng.chance(impair.loss) || impair.is_down() {
            c.lost += 1;
            return;
        }
        if rng.chance(impair.corrupt) && flip_udp_payload_bit(&mut frame[head..], rng) {
            c.corrupted += 1;
        }
        if self.held.is_none() && rng.chance(impair.reorder) {
            c.reordered += 1;
            self.held = Some((frame.to_vec(), Instant::now()));
            return;
        }
        self.send(frame, impair, rng, c);
        if rng.chance(impair.dup) {
            c.duplicated += 1;
            self.send(frame, impair, rng, c);
        }
        if let Some((f, _)) = self.held.take() {
            self.send(&f, impair, rng, c);
        }
    }

    /// Sends the held frame if it has waited [`HOLD`].
    fn release_late(&mut self, impair: Impair, rng: &mut SplitMix64, c: &mut Counts) {
        if self
            .held
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() >= HOLD)
        {
            let (f, _) = self.held.take().expect("checked");
            self.send(&f, impair, rng, c);
        }
    }

    /// When this direction next has something to send without a frame arriving.
    fn next_wake(&self) -> Option<Instant> {
        let held = self.held.as_ref().map(|(_, at)| *at + HOLD);
        let delayed = self.delay.as_ref().and_then(DelayLine::next_due);
        held.into_iter().chain(delayed).min()
    }
}

/// Sends `frame` out of socket `to`; counts a failure.
fn send(to: libc::c_int, frame: &[u8], c: &mut Counts) {
    // SAFETY: `frame` is initialised for its length.
    let s = unsafe { libc::send(to, frame.as_ptr().cast(), frame.len(), 0) };
    if s < 0 {
        c.dropped += 1;
    }
}

/// `struct virtio_net_hdr`'s size.
const VNET_HDR_LEN: usize = 10;

fn main() {
    if let Err(e) = run() {
        eprintln!("packet-relay: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut names = Vec::new();
    let mut vnet = true;
    let mut every = None;
    let mut impair = Impair::default();
    let mut seed = 1u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = || {
            it.next()
                .and_then(|s| s.parse::<f64>().ok())
                .ok_or_else(usage)
        };
        match a.as_str() {
            "--no-vnet" => vnet = false,
            "--vnet" => vnet = true,
            "--every" => every = Some(Duration::from_secs_f64(number()?)),
            "--loss" => impair.loss = number()?,
            "--dup" => impair.dup = number()?,
            "--reorder" => impair.reorder = number()?,
            "--corrupt" => impair.corrupt = number()?,
            "--down-at" => impair.down_at = Some(Duration::from_secs_f64(number()?)),
            "--down-for" => impair.down_for = Duration::from_secs_f64(number()?),
            "--seed" => seed = number()? as u64,
            "--delay" => impair.delay = Duration::from_secs_f64(number()? / 1e3),
            "--jitter" => impair.jitter = Duration::from_secs_f64(number()? / 1e3),
            _ => names.push(a.clone()),
        }
    }
    let mut rng = SplitMix64(seed);
    START.get_or_init(Instant::now);
    let [a, b] = names.as_slice() else {
        return Err(usage());
    };
    let socks = [open(a, vnet)?, open(b, vnet)?];
    let delayed = !impair.delay.is_zero() || !impair.jitter.is_zero();
    let mut ways = [1, 0].map(|to| Direction {
        to: socks[to],
        held: None,
        delay: delayed.then(DelayLine::new),
    });
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let mut counts = [Counts::default(), Counts::default()];
    let mut buf = vec![0u8; VNET_HDR_LEN + 65_536 + 256];
    let mut fds = socks.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let mut last = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        // Wait for a frame, or until a held or delayed one is due (at most 200 ms).
        let wake = ways.iter().filter_map(Direction::next_wake).min();
        let wait = wake.map_or(Duration::from_millis(200), |t| {
            t.saturating_duration_since(Instant::now())
        });
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` is an array of two pollfds; `ts` is a valid timespec.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for from in 0..2 {
            if fds[from].revents & libc::POLLIN == 0 {
                continue;
            }
            // Drain what is there, then look at the other side.
            for _ in 0..64 {
                // SAFETY: `buf` is writable for its length.
                let n = unsafe {
                    libc::recv(
                        socks[from],
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n <= 0 {
                    break;
                }
                let n = n as usize;
                let c = &mut counts[from];
                c.frames += 1;
                c.bytes += n as u64;
                if vnet && n >= VNET_HDR_LEN && buf[1] != 0 {
                    c.runs += 1;
                }
                let head = if vnet { VNET_HDR_LEN } else { 0 };
                ways[from].relay(&mut buf[..n], head, impair, &mut rng, c);
            }
        }
        for (way, c) in ways.iter_mut().zip(counts.iter_mut()) {
            way.release_late(impair, &mut rng, c);
            way.release_due(c);
        }
        if every.is_some_and(|e| last.elapsed() >= e) {
            report(&[a, b], &counts);
            last = Instant::now();
        }
    }
    report(&[a, b], &counts);
    Ok(())
}

fn usage() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "usage: packet-relay IF_A IF_B [--no-vnet] [--every SECONDS] [--loss P] [--dup P] \
         [--reorder P] [--corrupt P] [--seed N] [--down-at SECS --down-for SECS] \
         [--delay MS [--jitter MS]]",
    )
}

fn report(names: &[&String; 2], counts: &[Counts; 2]) {
    for (from, c) in counts.iter().enumerate() {
        eprintln!(
            "packet-relay: {} -> {}: {} frames ({} runs), {} bytes, {} not sent, \
             {} lost, {} duplicated, {} reordered, {} corrupted",
            names[from],
            names[1 - from],
            c.frames,
            c.runs,
            c.bytes,
            c.dropped,
            c.lost,
            c.duplicated,
            c.reordered,
            c.corrupted
        );
    }
}

/// A packet socket bound to interface `name` that receives every frame arriving on it (not
/// those it sends itself), with a virtio header before each frame if `vnet`.
fn open(name: &str, vnet: bool) -> io::Result<libc::c_int> {
    let cname = std::ffi::CString::new(name).map_err(|_| usage())?;
    // SAFETY: a plain call on a NUL-terminated name.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: a plain socket call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(proto)) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let one: libc::c_int = 1;
    let set = |name: libc::c_int| {
        // SAFETY: `one` is a c_int of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                name,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    set(libc::PACKET_IGNORE_OUTGOING)?;
    if vnet {
        set(libc::PACKET_VNET_HDR)?;
    }
    // A bigger receive buffer than the default: a burst of runs fits while the other side
    // is being served.
    let big: libc::c_int = 8 << 20;
    // SAFETY: `big` is a c_int of the size passed.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&big as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    // SAFETY: all-zero is a valid sockaddr_ll; the fields bind reads are set.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = index as libc::c_int;
    // SAFETY: `sll` is a valid sockaddr_ll of the length passed.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Flips one random bit of the UDP payload of the Ethernet frame `frame`, if it is IPv4 UDP
/// with a payload; returns whether it did.
fn flip_udp_payload_bit(frame: &mut [u8], rng: &mut SplitMix64) -> bool {
    const ETH: usize = 14;
    let is_ipv4 = frame.len() > ETH + 20 && frame[12..14] == [0x08, 0x00];
    if !is_ipv4 || frame[ETH + 9] != libc::IPPROTO_UDP as u8 {
        return false;
    }
    let payload = ETH + usize::from(frame[ETH] & 0x0f) * 4 + 8;
    if frame.len() <= payload {
        return false;
    }
    let bit = rng.below(((frame.len() - payload) * 8) as u64) as usize;
    frame[payload + bit / 8] ^= 1 << (bit % 8);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames `line` hands out at `now`, as their first bytes.
    fn due(line: &mut DelayLine, now: Instant) -> Vec<u8> {
        let mut out = Vec::new();
        line.release(now, |f| out.push(f[0]));
        out
    }

    #[test]
    fn the_delay_line_keeps_order_and_lets_a_shorter_wait_overtake() {
        let mut line = DelayLine::new();
        let t = Instant::now();
        let ms = Duration::from_millis;
        assert!(line.push(&[1; 100], t + ms(1)));
        assert!(line.push(&[2; 100], t + ms(3)));
        assert!(line.push(&[3; 100], t + ms(2)));
        assert!(line.push(&[4; 100], t + ms(3)));
        assert_eq!(line.next_due(), Some(t + ms(1)));
        assert_eq!(due(&mut line, t), b"");
        assert_eq!(due(&mut line, t + ms(1)), [1]);
        // 3 drew a shorter wait than 2: it goes first, and 2 holds its space.
        assert_eq!(due(&mut line, t + ms(2)), [3]);
        assert_eq!(line.frames.len(), 3);
        assert_eq!(due(&mut line, t + ms(3)), [2, 4]);
        assert!(line.frames.is_empty());
        assert_eq!(line.next_due(), None);
    }

    #[test]
    fn the_delay_line_wraps_and_refuses_what_does_not_fit() {
        let mut line = DelayLine::new();
        let t = Instant::now();
        let third = DELAY_BYTES / 3;
        let frame = vec![7u8; third];
        // Three thirds fit (the ring is never quite full); a fourth does not.
        assert!(line.push(&frame, t));
        assert!(line.push(&frame, t));
        assert!(line.push(&frame, t + Duration::from_millis(1)));
        assert!(!line.push(&frame, t));
        // The first two go; the next frame starts again at the beginning of the ring.
        assert_eq!(due(&mut line, t), [7, 7]);
        assert!(line.push(&[8; 10], t));
        assert_eq!(line.frames.back().map(|f| f.at), Some(0));
        // Nothing may overwrite the frame still waiting at the end of the ring.
        assert!(!line.push(&vec![9; 2 * third], t));
        assert!(line.push(&[9; 10], t));
        assert_eq!(due(&mut line, t + Duration::from_millis(1)), [7, 8, 9]);
        assert!(line.push(&frame, t));
        assert_eq!(line.frames.back().map(|f| f.at), Some(0));
    }
}
