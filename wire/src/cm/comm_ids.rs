//! The layout shared by RTU (IBTA 12.6.9) and DREP (12.6.11): two communication IDs and 224
//! bytes of private data, no reserved bits. [`comm_ids_message!`] writes it once; `rtu` and
//! `drep` each invoke it with their name, and [`comm_ids_tests!`] with their capture frame.
//!
//! ```text
//!  byte 0-3   | Local Communication ID       |
//!  byte 4-7   | Remote Communication ID      |
//!  byte 8-231 | Private Data (224)           |
//! ```

/// Defines `PRIVATE_DATA_LEN`, `Packet` and the `Repr` named `$repr` of a message with the
/// RTU/DREP layout; `$what` ("CM RTU") names it in errors and `Display`, `$name` in docs.
macro_rules! comm_ids_message {
    ($what:literal, $name:literal, $repr:ident) => {
        use $crate::cm::MSG_LEN;

        /// Bytes of private data.
        pub const PRIVATE_DATA_LEN: usize = 224;

        $crate::cm::layout::message! {
            $what, MSG_LEN;
            #[doc = concat!("A parsed ", $name, ": every field of the message.")]
            pub struct $repr {
                /// Local Communication ID: the sender's handle for the connection.
                value local_comm_id / set_local_comm_id: u32 = 0..4,
                /// Remote Communication ID: the receiver's handle for the connection.
                value remote_comm_id / set_remote_comm_id: u32 = 4..8,
                /// Private Data (224 bytes).
                bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 8..232,
            }
            display(r) "local_comm_id={:#010x} remote_comm_id={:#010x}",
                r.local_comm_id, r.remote_comm_id;
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Zeroes every reserved bit: this message has none, so this does nothing.
            pub fn clear_reserved(&mut self) {}
        }
    };
}
pub(crate) use comm_ids_message;

/// The tests of an RTU or DREP: the message of capture frame `$frame` starts with `$bytes`
/// (zero private data follows), whose communication IDs tshark shows as `$local` and
/// `$remote`.
#[cfg(test)]
macro_rules! comm_ids_tests {
    (
        $repr:ident, $what:literal, frame $frame:literal, $bytes:expr,
        $local:literal, $remote:literal
    ) => {
        use $crate::cm::test_util::zero_padded;

        static PACKET_BYTES: [u8; MSG_LEN] = zero_padded(&$bytes);

        fn repr() -> $repr {
            $repr {
                local_comm_id: $local,
                remote_comm_id: $remote,
                private_data: [0; PRIVATE_DATA_LEN],
            }
        }

        $crate::cm::layout::message_tests!($repr, $what, 232, frame $frame);

        /// The values tshark shows for the frame.
        #[test]
        fn test_deconstruct() {
            let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
            assert_eq!(p.local_comm_id(), $local);
            assert_eq!(p.remote_comm_id(), $remote);
            assert_eq!(p.private_data(), &[0u8; PRIVATE_DATA_LEN][..]);
        }

        #[test]
        fn test_construct() {
            let mut bytes = [0xa5u8; MSG_LEN];
            let mut p = Packet::new_unchecked(&mut bytes[..]);
            p.set_local_comm_id($local);
            p.set_remote_comm_id($remote);
            p.private_data_mut().fill(0);
            assert_eq!(bytes, PACKET_BYTES);
        }
    };
}
#[cfg(test)]
pub(crate) use comm_ids_tests;
