//! From captured Ethernet frames to the RoCE packets they hold.
//!
//! A frame is usually one packet. A capture on `lo` of softrnic's own traffic also holds UDP
//! GSO super-packets: one IP/UDP header in front of a whole segmentation run, which the kernel
//! never cut (see [`softrnic_wire::gso`]). Such a frame fails to parse as one packet (a First
//! or Middle packet longer than any path MTU), or parses with an ICRC that does not verify; it
//! is split, and each segment is rebuilt with the IP and UDP headers it would have had on the
//! wire, so that its ICRC can be checked.

use softrnic_wire::frame::{Frame, ETHERNET_HEADER_LEN};
use softrnic_wire::{gso, Error};

/// One RoCE packet (or non-RoCE frame) of a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The frame's number in the capture (1-based).
    pub frame: usize,
    /// For a segment of a GSO super-packet: its number (1-based) and the number of segments.
    pub seg: Option<(usize, usize)>,
    /// What it is.
    pub kind: Kind,
}

/// What a packet is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A RoCEv2 datagram (from the IP header on), to parse with `DatagramRepr::parse`.
    Roce(Vec<u8>),
    /// Not RoCEv2 (ARP, TCP, other UDP), of this many bytes: nothing to say.
    NotRoce(usize),
    /// A frame that claims to be RoCEv2 (or IP) but breaks the format.
    Malformed(Error),
}

impl Packet {
    /// `12`, or `12.3` for the third segment of frame 12.
    pub fn label(&self) -> String {
        match self.seg {
            Some((k, _)) => format!("{}.{k}", self.frame),
            None => self.frame.to_string(),
        }
    }
}

/// The packets of frame number `n`.
pub fn packets(n: usize, frame: &[u8]) -> Vec<Packet> {
    let one = |kind| {
        vec![Packet {
            frame: n,
            seg: None,
            kind,
        }]
    };
    let whole = Frame::parse(frame);
    let (icrc_ok, err) = match &whole {
        Ok(f) => (f.datagram.icrc_ok, None),
        Err(Error::NotRoce(_)) => return one(Kind::NotRoce(frame.len())),
        Err(e) => (false, Some(*e)),
    };
    if !icrc_ok && frame.len() > ETHERNET_HEADER_LEN {
        if let Ok(run) = gso::split(&frame[ETHERNET_HEADER_LEN..]) {
            // A frame that parsed as one packet is a run only if the run's ICRCs say so.
            if err.is_some() || run.icrc_verified() {
                let total = run.len();
                return run
                    .segments()
                    .enumerate()
                    .map(|(k, bytes)| Packet {
                        frame: n,
                        seg: Some((k + 1, total)),
                        kind: Kind::Roce(bytes),
                    })
                    .collect();
            }
        }
    }
    match whole {
        Ok(f) => {
            let at = ETHERNET_HEADER_LEN;
            one(Kind::Roce(
                frame[at..at + f.datagram.repr.buffer_len()].to_vec(),
            ))
        }
        Err(e) => one(Kind::Malformed(e)),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// The GSO super-packet of the real capture on `lo`.
    fn super_packet() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../wire/tests/data/softrnic_lo_gso.pcap"
        );
        softrnic_wire::pcap::read_file(path).unwrap().remove(0).data
    }

    #[test]
    fn a_super_packet_gives_its_segments_and_a_cut_one_does_not_panic() {
        let frame = super_packet();
        let segs = packets(1, &frame);
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[2].label(), "1.3");
        assert_eq!(segs[2].seg, Some((3, 3)));
        // Corrupt bytes all over it and cut it short: reported, never a panic.
        let mut x: u32 = 1;
        for round in 0..400 {
            let mut f = frame.clone();
            for _ in 0..1 + round % 4 {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let i = x as usize % f.len();
                f[i] ^= (x >> 24) as u8 | 1;
            }
            let cut = if round % 3 == 0 {
                f.len() - round
            } else {
                f.len()
            };
            assert!(!packets(1, &f[..cut]).is_empty());
        }
    }
}
