//! The layout shared by RTU (IBTA 12.6.9) and DREP (12.6.11): two communication IDs and 224
//! bytes of private data. [`comm_ids_message!`] writes the view and `Repr` of such a message
//! once; `rtu` and `drep` each invoke it with their name.
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
        use core::fmt;

        use $crate::cm::{get_array, get_u32, MSG_LEN};
        use $crate::Result;

        /// Bytes of private data.
        pub const PRIVATE_DATA_LEN: usize = 224;

        mod field {
            use $crate::cm::Field;

            pub const LOCAL_COMM_ID: Field = 0..4;
            pub const REMOTE_COMM_ID: Field = 4..8;
            pub const PRIVATE_DATA: Field = 8..232;
        }

        $crate::fixed_view!($what, MSG_LEN);

        impl<T: AsRef<[u8]>> Packet<T> {
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }
            /// The Local Communication ID field.
            pub fn local_comm_id(&self) -> u32 {
                get_u32(self.b(), field::LOCAL_COMM_ID)
            }
            /// The Remote Communication ID field.
            pub fn remote_comm_id(&self) -> u32 {
                get_u32(self.b(), field::REMOTE_COMM_ID)
            }
            /// The Private Data field (224 bytes).
            pub fn private_data(&self) -> &[u8] {
                &self.b()[field::PRIVATE_DATA]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            fn b_mut(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
            /// Zeroes every reserved bit: this message has none, so this does nothing.
            pub fn clear_reserved(&mut self) {}
            /// Sets the Local Communication ID field.
            pub fn set_local_comm_id(&mut self, v: u32) {
                self.b_mut()[field::LOCAL_COMM_ID].copy_from_slice(&v.to_be_bytes());
            }
            /// Sets the Remote Communication ID field.
            pub fn set_remote_comm_id(&mut self, v: u32) {
                self.b_mut()[field::REMOTE_COMM_ID].copy_from_slice(&v.to_be_bytes());
            }
            /// The Private Data field, writable.
            pub fn private_data_mut(&mut self) -> &mut [u8] {
                &mut self.b_mut()[field::PRIVATE_DATA]
            }
        }

        #[doc = concat!("A parsed ", $name, ": every field of the message.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $repr {
            /// Local Communication ID: the sender's handle for the connection.
            pub local_comm_id: u32,
            /// Remote Communication ID: the receiver's handle for the connection.
            pub remote_comm_id: u32,
            /// Private Data.
            pub private_data: [u8; PRIVATE_DATA_LEN],
        }

        impl $repr {
            #[doc = concat!("Parses a ", $name, " from the 232 bytes of MAD data.")]
            pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<$repr> {
                packet.check_len()?;
                Ok($repr {
                    local_comm_id: packet.local_comm_id(),
                    remote_comm_id: packet.remote_comm_id(),
                    private_data: get_array(packet.b(), field::PRIVATE_DATA),
                })
            }

            /// The message length (always 232).
            pub const fn buffer_len(&self) -> usize {
                MSG_LEN
            }

            /// Writes all 232 bytes.
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
                packet.clear_reserved();
                packet.set_local_comm_id(self.local_comm_id);
                packet.set_remote_comm_id(self.remote_comm_id);
                packet
                    .private_data_mut()
                    .copy_from_slice(&self.private_data);
            }
        }

        impl fmt::Display for $repr {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    concat!($what, " local_comm_id={:#010x} remote_comm_id={:#010x}"),
                    self.local_comm_id, self.remote_comm_id
                )
            }
        }
    };
}
pub(crate) use comm_ids_message;
