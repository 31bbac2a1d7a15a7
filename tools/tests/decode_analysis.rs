//! `softrnic decode --stats` and `--svg` on a crafted capture of an RC exchange with a lost
//! packet, a PSN sequence error NAK, a retransmission, an RNR NAK and a repeated ACK: the
//! counts per connection, the marks per packet, and the ladder diagram.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use softrnic_wire::aeth::{RnrTimer, Syndrome};
use softrnic_wire::Opcode;

mod capture;
use capture::{ack, datagram, send, A, ACK, B, NAK_SEQ};

fn decode(args: &[&str], file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_softrnic"))
        .arg("decode")
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A 3-packet SEND (PSNs 10-12, the middle two as one GSO run) and its ACK; SEND 13 is lost,
/// SEND 14 arrives and is NAKed (PSN sequence error); 13 and 14 are sent again; an RNR NAK;
/// ACK 14, twice. Written to `name` (a file per test: tests run at once).
fn exchange(name: &str) -> PathBuf {
    let only = |psn| datagram((A, B), 0, 0x11, Opcode::RC_SEND_ONLY, psn, &[7; 100], None);
    let msg = send(0, 10, 256, 3);
    let frames = vec![
        msg[0].clone(),
        capture::run(&msg[1..]),
        ack(12, ACK),
        only(14),
        ack(13, NAK_SEQ),
        only(13),
        only(14),
        ack(14, Syndrome::RnrNak(RnrTimer(1))),
        ack(14, ACK),
        ack(14, ACK),
    ];
    capture::write_pcap(name, &frames)
}

#[test]
fn stats_count_per_connection() {
    let path = exchange("stats.pcap");
    let v: Value = serde_json::from_str(&decode(&["--stats", "--json"], &path)).unwrap();
    let conns = v["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2, "{v}");
    let (req, resp) = (&conns[0], &conns[1]);
    assert_eq!(
        (&req["src"], &req["dest_qp"]),
        (&json!("10.0.0.1"), &json!(0x11))
    );
    assert_eq!(req["packets"], 6);
    assert_eq!(
        req["messages"], 3,
        "12 (LAST), 14 and 13; the second 14 is a resend"
    );
    assert_eq!(req["bytes"], 3 * 256 + 3 * 100);
    assert_eq!(req["retransmissions"], 1);
    assert_eq!(
        (&req["psn_gaps"], &req["psns_missing"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(req["by_opcode"]["RC_SEND_ONLY"], 3);
    assert_eq!(req["by_operation"], json!({"Send": 6}));
    assert_eq!(resp["by_operation"], json!({"Acknowledge": 5}));
    assert_eq!(resp["acks"], 3);
    assert_eq!(resp["duplicates"], 1);
    assert_eq!(
        resp["naks"],
        json!({"NAK_PSN_SEQUENCE_ERROR": 1, "RNR_NAK timer=10us": 1})
    );

    let text = decode(&["--stats"], &path);
    let row = text.lines().find(|l| l.starts_with("10.0.0.1")).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    // connection (5 words), packets, msgs, bytes, retrans, dup, gaps, acks, naks
    assert_eq!(
        cols[5..],
        ["6", "3", "1068", "1", "0", "1", "0", "0"],
        "{text}"
    );
    assert!(
        text.contains("naks: NAK_PSN_SEQUENCE_ERROR=1 RNR_NAK timer=10us=1"),
        "{text}"
    );
}

#[test]
fn retransmissions_are_marked_per_packet() {
    let path = exchange("marks.pcap");
    let text = decode(&[], &path);
    let marked: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with(" retransmission"))
        .collect();
    assert_eq!(marked.len(), 1, "{text}");
    assert!(marked[0].trim_start().starts_with("7 ") && marked[0].contains("psn=14"));
    let objs: Vec<Value> = decode(&["--json"], &path)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let retx: Vec<u64> = objs
        .iter()
        .filter(|o| o["retransmission"] == true)
        .map(|o| o["frame"].as_u64().unwrap())
        .collect();
    assert_eq!(retx, [7]);
    assert_eq!(objs.iter().filter(|o| o["duplicate"] == true).count(), 1);
}

#[test]
fn the_ladder_has_an_arrow_per_packet_and_colours_resends_and_naks() {
    let path = exchange("ladder.pcap");
    let svg = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("exchange.svg");
    decode(&["--svg", svg.to_str().unwrap()], &path);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let arrows: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("line") && n.attribute("class") == Some("packet"))
        .collect();
    assert_eq!(
        arrows.len(),
        11,
        "a packet per arrow, the run's two segments included"
    );
    let colour = |c| {
        arrows
            .iter()
            .filter(|n| n.attribute("stroke") == Some(c))
            .count()
    };
    assert_eq!((colour("red"), colour("orange")), (1, 2));
    let lifelines = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("lifeline"))
        .count();
    assert_eq!(lifelines, 2);

    decode(&["--svg", svg.to_str().unwrap(), "--max", "3"], &path);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(text.matches("class=\"packet\"").count(), 3);
}

#[test]
fn a_read_request_takes_the_psns_of_its_responses() {
    // READ of 4096 bytes at PSN 20: at PMTU 1024 its responses take PSNs 20-23, and the next
    // request is 24, which is no gap. PSN 60 afterwards is one (a path MTU of 256 would have
    // taken 16 PSNs, up to 35).
    let only = |psn| datagram((A, B), 0, 0x11, Opcode::RC_SEND_ONLY, psn, &[1; 8], None);
    let frames = [capture::read_request(20, 4096), only(24), only(60)];
    let path = capture::write_pcap("read.pcap", &frames);
    let v: Value = serde_json::from_str(&decode(&["--stats", "--json"], &path)).unwrap();
    let c = &v["connections"][0];
    assert_eq!(
        (&c["psn_gaps"], &c["psns_missing"]),
        (&json!(1), &json!(35)),
        "{v}"
    );
    assert_eq!(
        (&c["messages"], &c["retransmissions"]),
        (&json!(3), &json!(0))
    );
}

#[test]
fn a_message_cut_short_is_a_broken_message() {
    // SEND FIRST and MIDDLE, then a SEND ONLY at the next PSN: the first SEND never ended. A
    // SEND LAST then continues nothing either. Neither is a gap or a resend.
    let pkt = |op, psn| datagram((A, B), 0, 0x11, op, psn, &[0; 256], None);
    let frames = [
        pkt(Opcode::RC_SEND_FIRST, 1),
        pkt(Opcode::RC_SEND_MIDDLE, 2),
        pkt(Opcode::RC_SEND_ONLY, 3),
        pkt(Opcode::RC_SEND_LAST, 4),
    ];
    let path = capture::write_pcap("broken.pcap", &frames);
    let v: Value = serde_json::from_str(&decode(&["--stats", "--json"], &path)).unwrap();
    let c = &v["connections"][0];
    assert_eq!(c["broken_messages"], 2, "{v}");
    assert_eq!(
        (&c["psn_gaps"], &c["retransmissions"]),
        (&json!(0), &json!(0))
    );
    assert!(decode(&["--stats"], &path).contains("broken messages: 2"));
}
