//! The line or JSON object of one packet: the datagram's headers (and, for a UD packet to QP1,
//! its MAD and CM message), then what the analysis noted (`retransmission`).

use serde_json::{json, Map, Value};
use softrnic_wire::cm::CmMessage;
use softrnic_wire::frame::{Datagram, DatagramRepr};
use softrnic_wire::mad::{self, MadRepr};
use softrnic_wire::opcode::Transport;
use softrnic_wire::Error;

use super::analysis::Note;
use super::packets::{packets, Kind, Packet};

/// The management datagram a UD packet to QP1 carries, and the CM message inside it.
pub struct Management {
    /// The MAD header.
    pub mad: MadRepr,
    /// The CM message, when the MAD is of the CM class and parses.
    pub cm: Option<Result<CmMessage, Error>>,
}

/// Decodes the MAD (and CM message) of a UD packet to QP1; `None` for any other packet.
pub fn management(d: &Datagram<'_>) -> Option<Result<Management, Error>> {
    let bth = &d.repr.roce.bth;
    let ud = bth.opcode.info().map(|i| i.transport) == Some(Transport::Ud);
    if !ud || bth.dest_qp != mad::GSI_QPN {
        return None;
    }
    Some((|| {
        let p = mad::Packet::new_checked(d.payload)?;
        let mad = MadRepr::parse(&p)?;
        let cm = (mad.mgmt_class == mad::MGMT_CLASS_CM)
            .then(|| CmMessage::parse(mad.attribute_id, p.data()));
        Ok(Management { mad, cm })
    })())
}

/// The line of one packet: its label (`12`, or `12.3` for a GSO segment), then the datagram.
pub fn line(p: &Packet, note: &Note) -> String {
    let n = p.label();
    match &p.kind {
        Kind::Roce(bytes) => match DatagramRepr::parse(bytes) {
            Ok(d) => {
                let mut line = format!("{n:>5} {d}");
                match management(&d) {
                    Some(Ok(m)) => {
                        line += &format!(" | {}", m.mad);
                        match m.cm {
                            Some(Ok(cm)) => line += &format!(" | {cm}"),
                            Some(Err(e)) => line += &format!(" | bad CM message: {e}"),
                            None => {}
                        }
                    }
                    Some(Err(e)) => line += &format!(" | bad MAD: {e}"),
                    None => {}
                }
                if note.retransmission {
                    line += " retransmission";
                }
                if note.duplicate {
                    line += " duplicate";
                }
                line
            }
            Err(e) => format!("{n:>5} malformed RoCE segment: {e}"),
        },
        Kind::NotRoce(len) => format!("{n:>5} (not RoCE, {len} bytes)"),
        Kind::Malformed(e) => format!("{n:>5} malformed RoCE frame: {e}"),
    }
}

/// The JSON object of one packet: `frame`, `seg` and `segs` for a GSO segment, the headers,
/// `retransmission` / `duplicate` when the analysis says so.
pub fn object(p: &Packet, note: &Note) -> Value {
    let mut v = match &p.kind {
        Kind::Roce(bytes) => match DatagramRepr::parse(bytes) {
            Ok(d) => datagram_json(p.frame, &d),
            Err(e) => json!({ "frame": p.frame, "roce": true, "error": e.to_string() }),
        },
        Kind::NotRoce(_) => json!({ "frame": p.frame, "roce": false }),
        Kind::Malformed(e) => json!({ "frame": p.frame, "roce": true, "error": e.to_string() }),
    };
    if let Some((k, n)) = p.seg {
        v["seg"] = json!(k);
        v["segs"] = json!(n);
    }
    if note.retransmission {
        v["retransmission"] = json!(true);
    }
    if note.duplicate {
        v["duplicate"] = json!(true);
    }
    v
}

/// The lines of frame number `n` (1-based), one per packet, without analysis.
pub fn summary_line(n: usize, frame: &[u8]) -> String {
    let lines: Vec<String> = packets(n, frame)
        .iter()
        .map(|p| line(p, &Note::default()))
        .collect();
    lines.join("\n")
}

/// The JSON object of frame number `n` (1-based), without analysis; for a GSO super-packet,
/// an array of its segments' objects.
pub fn json_object(n: usize, frame: &[u8]) -> Value {
    let mut all: Vec<Value> = packets(n, frame)
        .iter()
        .map(|p| object(p, &Note::default()))
        .collect();
    if all.len() == 1 {
        all.remove(0)
    } else {
        Value::Array(all)
    }
}

fn datagram_json(n: usize, d: &Datagram<'_>) -> Value {
    let r = &d.repr;
    let bth = &r.roce.bth;
    let mut o = Map::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_string(), v);
    };
    put("frame", json!(n));
    put("roce", json!(true));
    put("src", json!(r.ip.src_addr().to_string()));
    put("dst", json!(r.ip.dst_addr().to_string()));
    put("src_port", json!(r.udp.src_port));
    put("opcode", json!(bth.opcode.0));
    put("opcode_name", json!(bth.opcode.name()));
    put("dest_qp", json!(bth.dest_qp));
    put("psn", json!(bth.psn.value()));
    put("ack_req", json!(bth.ack_req));
    put("solicited", json!(bth.solicited));
    put("mig_req", json!(bth.mig_req));
    put("pkey", json!(bth.pkey));
    put("fecn", json!(bth.fecn));
    put("becn", json!(bth.becn));
    put("payload_len", json!(r.roce.payload_len));
    let icrc = d.icrc.to_le_bytes();
    put(
        "icrc",
        json!(icrc.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    );
    put("icrc_ok", json!(d.icrc_ok));
    if let Some(h) = r.roce.reth {
        put(
            "reth",
            json!({ "va": h.va, "rkey": h.rkey, "len": h.dma_len }),
        );
    }
    if let Some(h) = r.roce.aeth {
        put(
            "aeth",
            json!({ "syndrome": h.syndrome.to_byte(), "kind": h.syndrome.kind(), "msn": h.msn }),
        );
    }
    if let Some(h) = r.roce.deth {
        put("deth", json!({ "qkey": h.qkey, "src_qp": h.src_qp }));
    }
    if let Some(h) = r.roce.atomic_eth {
        put(
            "atomic",
            json!({ "va": h.va, "rkey": h.rkey, "swap_add": h.swap_add, "compare": h.compare }),
        );
    }
    if let Some(h) = r.roce.atomic_ack_eth {
        put("atomic_ack", json!({ "orig": h.orig_rem_dt }));
    }
    if let Some(h) = r.roce.immdt {
        put("imm", json!(h.0));
    }
    if let Some(h) = r.roce.ieth {
        put("ieth", json!({ "rkey": h.0 }));
    }
    if let Some(h) = r.roce.feth {
        put(
            "feth",
            json!({ "selectivity": h.selectivity as u8, "placement": h.placement }),
        );
    }
    match management(d) {
        Some(Ok(m)) => {
            put(
                "mad",
                json!({
                    "class": m.mad.mgmt_class,
                    "method": m.mad.method,
                    "response": m.mad.response,
                    "attribute_id": m.mad.attribute_id,
                    "attribute": mad::cm_attribute_name(m.mad.attribute_id),
                    "tid": m.mad.transaction_id,
                }),
            );
            match m.cm {
                Some(Ok(cm)) => put("cm", json!({ "summary": cm.to_string() })),
                Some(Err(e)) => put("cm", json!({ "error": e.to_string() })),
                None => {}
            }
        }
        Some(Err(e)) => put("mad", json!({ "error": e.to_string() })),
        None => {}
    }
    Value::Object(o)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn non_roce_and_garbage_frames_are_reported_not_fatal() {
        // An ARP frame (EtherType 0x0806) is not RoCE.
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(json_object(3, &arp), json!({"frame": 3, "roce": false}));
        // An IPv4 header that promises more bytes than there are.
        let mut short = vec![0u8; 40];
        short[12] = 0x08;
        short[14] = 0x45;
        short[17] = 200;
        let v = json_object(4, &short);
        assert_eq!(v["frame"], 4);
        assert!(v["error"].as_str().unwrap().contains("truncated"), "{v}");
        assert!(summary_line(4, &short).contains("malformed"));
    }
}
