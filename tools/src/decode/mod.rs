//! `softrnic decode`: one line per captured packet, like a terse Wireshark summary, or one JSON
//! object per packet; a per-connection summary (`--stats`); a ladder diagram (`--svg`).
//!
//! * [`mod@packets`]: a captured frame becomes the RoCE packets it holds: one, or several when it
//!   is a UDP GSO super-packet as a capture on `lo` shows softrnic's segmentation runs (see
//!   [`softrnic_wire::gso`]).
//! * [`render`]: the line or JSON object of one packet.
//! * [`analysis`]: the PSN bookkeeping of each connection (IBTA 9.7), which marks
//!   retransmissions in the per-packet output and counts what `--stats` prints ([`stats`]).
//! * [`svg`]: the ladder diagram.
//!
//! A malformed frame is reported and never stops the decoder.

pub mod analysis;
pub mod packets;
pub mod render;
pub mod stats;
pub mod svg;

pub use packets::{packets, Kind, Packet};
pub use render::{json_object, management, summary_line, Management};

use softrnic_wire::frame::DatagramRepr;

use analysis::Analysis;

/// Decodes a capture frame by frame, in order, keeping only the analysis: a capture of any
/// size streams through.
#[derive(Debug, Default)]
pub struct Decoder {
    analysis: Analysis,
}

impl Decoder {
    /// The packets of frame number `n` (1-based), each with what the analysis notes of it.
    pub fn frame(&mut self, n: usize, frame: &[u8]) -> Vec<(Packet, analysis::Note)> {
        packets(n, frame)
            .into_iter()
            .map(|p| {
                let note = match &p.kind {
                    Kind::Roce(bytes) => DatagramRepr::parse(bytes)
                        .map(|d| self.analysis.observe(&d))
                        .unwrap_or_default(),
                    _ => analysis::Note::default(),
                };
                (p, note)
            })
            .collect()
    }

    /// The analysis of the frames so far.
    pub fn analysis(&self) -> &Analysis {
        &self.analysis
    }
}

/// Decodes a whole capture's frames (in order): every packet, its note, and the analysis.
pub fn decode_all<'a>(
    frames: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Packet>, Vec<analysis::Note>, Analysis) {
    let mut d = Decoder::default();
    let (packets, notes) = frames
        .into_iter()
        .enumerate()
        .flat_map(|(i, f)| d.frame(i + 1, f))
        .unzip();
    (packets, notes, d.analysis)
}
