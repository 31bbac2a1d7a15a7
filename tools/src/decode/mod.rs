//! `softrnic decode`: one line per captured packet, like a terse Wireshark summary, or one JSON
//! object per packet; a per-connection summary (`--stats`); a ladder diagram (`--svg`).
//!
//! * [`packets`]: a captured frame becomes the RoCE packets it holds: one, or several when it
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

use serde_json::Value;
use softrnic_wire::frame::DatagramRepr;

use analysis::Analysis;

/// Decodes a capture's frames (in order): the per-packet JSON objects or lines, with their
/// retransmission marks, and the analysis of the whole.
pub fn decode_all<'a>(
    frames: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Packet>, Vec<analysis::Note>, Analysis) {
    let mut analysis = Analysis::default();
    let mut all = Vec::new();
    let mut notes = Vec::new();
    for (i, frame) in frames.into_iter().enumerate() {
        for p in packets(i + 1, frame) {
            let note = match &p.kind {
                Kind::Roce(bytes) => match DatagramRepr::parse(bytes) {
                    Ok(d) => analysis.observe(&d),
                    Err(_) => analysis::Note::default(),
                },
                _ => analysis::Note::default(),
            };
            all.push(p);
            notes.push(note);
        }
    }
    (all, notes, analysis)
}

/// The text lines of `packets`, with their notes.
pub fn lines(packets: &[Packet], notes: &[analysis::Note]) -> Vec<String> {
    packets
        .iter()
        .zip(notes)
        .map(|(p, n)| render::line(p, n))
        .collect()
}

/// The JSON objects of `packets`, with their notes.
pub fn objects(packets: &[Packet], notes: &[analysis::Note]) -> Vec<Value> {
    packets
        .iter()
        .zip(notes)
        .map(|(p, n)| render::object(p, n))
        .collect()
}
