//! Fuzzes every parser of the wire layer and the decoder's pretty-printers, analysis and
//! ladder diagram with arbitrary bytes: nothing may panic, a GSO run that splits gives segments
//! that parse, and a frame that parses must re-emit into one that parses to the same `Repr`
//! with a valid ICRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use softrnic_tools::decode;
use softrnic_wire::frame::{DatagramRepr, Frame};
use softrnic_wire::roce::RoceRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(run) = softrnic_wire::gso::split(data) {
        for seg in run.segments() {
            let _ = DatagramRepr::parse(&seg).expect("a rebuilt segment must parse");
        }
    }
    let _ = decode::json_object(1, data);
    let _ = decode::summary_line(1, data);
    let (packets, notes, analysis) = decode::decode_all([data]);
    let _ = decode::stats::text(&analysis);
    let _ = decode::svg::ladder(&packets, &notes, 200);
    let _ = DatagramRepr::parse(data);
    let _ = RoceRepr::parse(data);
    if let Ok(f) = Frame::parse(data) {
        let repr = f.repr();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &[f.datagram.payload])
            .expect("a parsed frame must emit");
        let g = Frame::parse(&buf).expect("an emitted frame must parse");
        assert_eq!(g.repr(), repr);
        assert_eq!(g.datagram.payload, f.datagram.payload);
        assert!(g.datagram.icrc_ok);
    }
});
