//! `softrnic decode --svg OUT`: a ladder (sequence) diagram of the first packets of a capture.
//!
//! One vertical lifeline per host address, in order of first appearance; one arrow per RoCE
//! packet from its source to its destination, going down the page in capture order, labelled
//! with the frame, the opcode (transport prefix dropped), the PSN and the AETH syndrome.
//! Retransmissions (IBTA 9.7.5.1) are red, NAKs and RNR NAKs (9.4.1) orange. Built as a
//! string: the few elements it needs do not call for an SVG crate.

use std::fmt::Write;
use std::net::IpAddr;

use softrnic_wire::frame::DatagramRepr;

use super::analysis::Note;
use super::packets::{Kind, Packet};

const MARGIN: usize = 40;
const LANE: usize = 420;
const TOP: usize = 60;
const ROW: usize = 30;
const SLANT: usize = 16;

/// The SVG of the first `max` RoCE packets of `packets` (with their notes).
pub fn ladder(packets: &[Packet], notes: &[Note], max: usize) -> String {
    struct Arrow {
        src: IpAddr,
        dst: IpAddr,
        label: String,
        color: &'static str,
    }
    let mut arrows = Vec::new();
    let mut hosts: Vec<IpAddr> = Vec::new();
    for (p, note) in packets.iter().zip(notes) {
        if arrows.len() == max {
            break;
        }
        let Kind::Roce(bytes) = &p.kind else { continue };
        let Ok(d) = DatagramRepr::parse(bytes) else {
            continue;
        };
        let r = &d.repr;
        let (src, dst) = (r.ip.src_addr(), r.ip.dst_addr());
        for a in [src, dst] {
            if !hosts.contains(&a) {
                hosts.push(a);
            }
        }
        let name = r.roce.bth.opcode.name();
        let short = name.split_once('_').map_or(name, |(_, s)| s);
        let mut label = format!("{} {short} psn={}", p.label(), r.roce.bth.psn);
        if let Some(a) = r.roce.aeth {
            label += &format!(" {}", a.syndrome.kind());
        }
        if note.retransmission {
            label += " (retransmission)";
        }
        if note.duplicate {
            label += " (duplicate)";
        }
        let color = if note.retransmission {
            "red"
        } else if note.nak {
            "orange"
        } else {
            "black"
        };
        arrows.push(Arrow {
            src,
            dst,
            label,
            color,
        });
    }
    let x = |a: IpAddr| MARGIN + 100 + LANE * hosts.iter().position(|&h| h == a).unwrap_or(0);
    let width = 2 * (MARGIN + 100) + LANE * hosts.len().saturating_sub(1);
    let height = TOP + ROW * arrows.len() + SLANT + MARGIN;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">"#
    );
    s += r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>"#;
    s += "\n";
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for &h in &hosts {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-weight="bold">{}</text>"#,
            x(h),
            TOP - 25,
            escape(&h.to_string())
        );
        let _ = writeln!(
            s,
            r#"<line class="lifeline" x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="gray" stroke-dasharray="4 3"/>"#,
            x(h),
            TOP - 15,
            height - MARGIN / 2
        );
    }
    for (i, a) in arrows.iter().enumerate() {
        let (x1, x2) = (x(a.src), x(a.dst));
        let (y1, y2) = (TOP + ROW * i, TOP + ROW * i + SLANT);
        let _ = writeln!(
            s,
            r#"<line class="packet" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{c}" marker-end="url(#arrow)"/>"#,
            c = a.color
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" fill="{}">{}</text>"#,
            (x1 + x2) / 2,
            (y1 + y2) / 2 - 5,
            a.color,
            escape(&a.label)
        );
    }
    s += "</svg>\n";
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
