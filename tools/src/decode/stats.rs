//! `softrnic decode --stats`: the per-connection counts of [`super::analysis`] as a table, or
//! as one JSON object.

use std::fmt::Write;

use serde_json::{json, Value};

use super::analysis::Analysis;

/// The table: a row per connection, then its opcodes and NAKs on indented lines.
pub fn text(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<40} {:>8} {:>6} {:>10} {:>7} {:>5} {:>5} {:>6} {:>5}",
        "connection (src > dst qp)",
        "packets",
        "msgs",
        "bytes",
        "retrans",
        "dup",
        "gaps",
        "acks",
        "naks"
    );
    for (k, c) in a.connections() {
        let conn = format!("{} > {} qp {:#x}", k.src, k.dst, k.dest_qp);
        let naks: u64 = c.naks.values().sum();
        let _ = writeln!(
            out,
            "{conn:<40} {:>8} {:>6} {:>10} {:>7} {:>5} {:>5} {:>6} {naks:>5}",
            c.packets, c.messages, c.bytes, c.retransmissions, c.duplicates, c.psn_gaps, c.acks
        );
        let ops: Vec<String> = c
            .by_opcode
            .iter()
            .map(|(o, n)| format!("{o}={n}"))
            .collect();
        let _ = writeln!(out, "    ops: {}", ops.join(" "));
        let kinds: Vec<String> = c
            .by_operation
            .iter()
            .map(|(o, n)| format!("{o}={n}"))
            .collect();
        let _ = writeln!(out, "    operations: {}", kinds.join(" "));
        if c.broken_messages > 0 {
            let _ = writeln!(out, "    broken messages: {}", c.broken_messages);
        }
        if c.psn_gaps > 0 {
            let _ = writeln!(out, "    PSNs missing: {}", c.psns_missing);
        }
        if !c.naks.is_empty() {
            let naks: Vec<String> = c.naks.iter().map(|(o, n)| format!("{o}={n}")).collect();
            let _ = writeln!(out, "    naks: {}", naks.join(" "));
        }
    }
    out
}

/// `{"connections": [{"src", "dst", "dest_qp", "packets", "by_opcode": {..},
/// "by_operation": {..}, "messages", "broken_messages",
/// "bytes", "retransmissions", "duplicates", "psn_gaps", "psns_missing", "acks",
/// "naks": {..}}, ..]}`.
pub fn json(a: &Analysis) -> Value {
    let conns: Vec<Value> = a
        .connections()
        .map(|(k, c)| {
            json!({
                "src": k.src.to_string(),
                "dst": k.dst.to_string(),
                "dest_qp": k.dest_qp,
                "packets": c.packets,
                "by_opcode": c.by_opcode,
                "by_operation": c.by_operation,
                "messages": c.messages,
                "broken_messages": c.broken_messages,
                "bytes": c.bytes,
                "retransmissions": c.retransmissions,
                "duplicates": c.duplicates,
                "psn_gaps": c.psn_gaps,
                "psns_missing": c.psns_missing,
                "acks": c.acks,
                "naks": c.naks,
            })
        })
        .collect();
    json!({ "connections": conns })
}
