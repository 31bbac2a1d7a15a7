//! DisconnectReply, DREP (IBTA 12.6.11, table "DREP message contents"): the answer to a
//! DREQ; both sides then enter TimeWait. The layout (two communication IDs, 224 bytes of
//! private data) is the RTU's, written once in `comm_ids`.

super::comm_ids::comm_ids_message!("CM DREP", "DREP", DrepRepr);

#[cfg(test)]
mod test {
    use super::*;

    // The DREP of frame 65 of tests/data/rping_rdmacm.pcap (MAD data; zero private data);
    // tshark: "CM DisconnectReply".
    crate::cm::comm_ids::comm_ids_tests!(
        DrepRepr,
        "CM DREP",
        frame 65,
        [0xb9, 0xa6, 0xe9, 0x21, 0x35, 0x70, 0xa4, 0x9b],
        0xb9a6e921,
        0x3570a49b
    );
}
