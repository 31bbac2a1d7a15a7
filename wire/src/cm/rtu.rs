//! ReadyToUse, RTU (IBTA 12.6.9, table "RTU message contents"): the active side confirms the
//! REP; the connection is established. The layout (two communication IDs, 224 bytes of
//! private data) is the DREP's, written once in `comm_ids`.

super::comm_ids::comm_ids_message!("CM RTU", "RTU", RtuRepr);

#[cfg(test)]
mod test {
    use super::*;

    // The RTU of frame 3 of tests/data/rping_rdmacm.pcap (MAD data; zero private data);
    // tshark: "CM ReadyToUse".
    crate::cm::comm_ids::comm_ids_tests!(
        RtuRepr,
        "CM RTU",
        frame 3,
        [0x35, 0x70, 0xa4, 0x9b, 0xb9, 0xa6, 0xe9, 0x21],
        0x3570a49b,
        0xb9a6e921
    );
}
