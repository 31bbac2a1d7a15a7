//! How the field tables of IBTA 12.6 become code. Every CM message (and the REQ's path
//! information) is a fixed-length run of fields; [`message!`] turns one table of them into a
//! zero-copy `Packet` view with a getter and a setter per field, and a `Repr` struct whose
//! `parse` reads every field and whose `emit` clears the reserved bits and writes every field.
//!
//! The tables of IBTA 12.6 number bits from the most significant bit of each 32-bit word;
//! here a whole-byte field is a byte range (a big-endian integer of any width up to 8 bytes,
//! or raw bytes) or a byte index, and a field narrower than a byte is a [`Bits`].

use crate::Psn;

/// A byte range inside a message.
pub(crate) type Field = core::ops::Range<usize>;

/// A field narrower than a byte: `width` bits of byte `byte`, the lowest at bit `shift`
/// (bit 0 is the least significant).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bits {
    byte: usize,
    shift: u8,
    width: u8,
}

impl Bits {
    pub(crate) const fn new(byte: usize, shift: u8, width: u8) -> Bits {
        Bits { byte, shift, width }
    }
    const fn mask(self) -> u8 {
        (((1u16 << self.width) - 1) as u8) << self.shift
    }
}

/// Reading and writing a field of type `V` at a place in the message bytes. Setters keep
/// only the bits that fit: a 24-bit field written from a `u32` drops its top byte.
pub(crate) trait Access<V> {
    fn get(&self, b: &[u8]) -> V;
    fn set(&self, b: &mut [u8], v: V);
}

/// The big-endian integer in bytes `f` (at most 8 of them).
fn get_be(b: &[u8], f: Field) -> u64 {
    b[f].iter().fold(0, |acc, &x| (acc << 8) | u64::from(x))
}

/// Writes the low `f.len()` bytes of `v` into bytes `f`, big-endian.
fn set_be(b: &mut [u8], f: Field, v: u64) {
    let n = f.len();
    b[f].copy_from_slice(&v.to_be_bytes()[8 - n..]);
}

impl Access<u16> for Field {
    fn get(&self, b: &[u8]) -> u16 {
        get_be(b, self.clone()) as u16
    }
    fn set(&self, b: &mut [u8], v: u16) {
        set_be(b, self.clone(), v.into());
    }
}

/// A 32-bit field, or a 24-bit one (QPN, EECN) over a 3-byte range.
impl Access<u32> for Field {
    fn get(&self, b: &[u8]) -> u32 {
        get_be(b, self.clone()) as u32
    }
    fn set(&self, b: &mut [u8], v: u32) {
        set_be(b, self.clone(), v.into());
    }
}

impl Access<u64> for Field {
    fn get(&self, b: &[u8]) -> u64 {
        get_be(b, self.clone())
    }
    fn set(&self, b: &mut [u8], v: u64) {
        set_be(b, self.clone(), v);
    }
}

/// A Starting PSN: 24 bits over a 3-byte range.
impl Access<Psn> for Field {
    fn get(&self, b: &[u8]) -> Psn {
        Psn::new(Access::<u32>::get(self, b))
    }
    fn set(&self, b: &mut [u8], v: Psn) {
        Access::<u32>::set(self, b, v.value());
    }
}

/// Raw bytes (a GID, private data), copied whole.
impl<const N: usize> Access<[u8; N]> for Field {
    fn get(&self, b: &[u8]) -> [u8; N] {
        b[self.clone()].try_into().expect("field length")
    }
    fn set(&self, b: &mut [u8], v: [u8; N]) {
        b[self.clone()].copy_from_slice(&v);
    }
}

/// A whole byte.
impl Access<u8> for usize {
    fn get(&self, b: &[u8]) -> u8 {
        b[*self]
    }
    fn set(&self, b: &mut [u8], v: u8) {
        b[*self] = v;
    }
}

impl Access<u8> for Bits {
    fn get(&self, b: &[u8]) -> u8 {
        (b[self.byte] & self.mask()) >> self.shift
    }
    fn set(&self, b: &mut [u8], v: u8) {
        let m = self.mask();
        b[self.byte] = (b[self.byte] & !m) | ((v << self.shift) & m);
    }
}

/// A one-bit flag.
impl Access<bool> for Bits {
    fn get(&self, b: &[u8]) -> bool {
        Access::<u8>::get(self, b) != 0
    }
    fn set(&self, b: &mut [u8], v: bool) {
        Access::<u8>::set(self, b, v.into());
    }
}

/// Zeroes the reserved bytes and bits of a message.
pub(crate) fn clear(b: &mut [u8], bytes: &[Field], bits: &[Bits]) {
    for f in bytes {
        b[f.clone()].fill(0);
    }
    for r in bits {
        r.set(b, 0);
    }
}

/// Defines the `Packet` view and the `Repr` of a message from its field table, in the order
/// of the IBTA table. Each row is `kind getter / setter: Type = place,` where `kind` is
///
/// * `value`: a number or flag; `setter(v: Type)`;
/// * `array`: bytes returned by value (a GID); `setter(v: &Type)`;
/// * `bytes`: raw bytes seen as a slice (private data); the "setter" is `getter_mut`;
/// * `path`: the REQ's path information, a [`crate::cm::path`] view; `Type` is `PathRepr`.
///
/// The module must define `clear_reserved` on the writable view (`emit` calls it first).
/// `display(r) "format", args;` (optional) gives the `Display` text after `$what`.
macro_rules! message {
    (
        $what:literal, $len:ident;
        $(#[$repr_attr:meta])*
        pub struct $repr:ident {
            $( $(#[$doc:meta])* $kind:ident $get:ident / $set:ident : $ty:ty = $place:expr, )*
        }
        $( display($r:ident) $fmt:literal $(, $arg:expr)*; )?
    ) => {
        $crate::fixed_view!($what, $len);

        impl<T: AsRef<[u8]>> Packet<T> {
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            fn b_mut(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
        }

        $( $crate::cm::layout::accessors!($kind $(#[$doc])* $get / $set : $ty = $place); )*

        $(#[$repr_attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $repr {
            $( $(#[$doc])* pub $get: $ty, )*
        }

        impl $repr {
            /// Parses every field; fails only if the buffer is too short.
            pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> $crate::Result<$repr> {
                packet.check_len()?;
                Ok($repr {
                    $( $get: $crate::cm::layout::parse_field!($kind packet, $get, $place), )*
                })
            }

            /// Every field zero: the start of a message built field by field.
            pub fn zeroed() -> $repr {
                let zeros = [0u8; $len];
                match $repr::parse(&Packet::new_unchecked(&zeros[..])) {
                    Ok(r) => r,
                    Err(_) => unreachable!("a buffer of the message's length parses"),
                }
            }

            #[doc = concat!("The length on the wire: always [`", stringify!($len), "`].")]
            pub const fn buffer_len(&self) -> usize {
                $len
            }

            /// Writes every byte: reserved bits as zero, then each field in table order.
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
                packet.clear_reserved();
                $( $crate::cm::layout::emit_field!($kind self, packet, $get, $set); )*
            }
        }

        $(
            impl core::fmt::Display for $repr {
                fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                    let $r = self;
                    write!(f, concat!($what, " ", $fmt) $(, $arg)*)
                }
            }
        )?
    };
}
pub(crate) use message;

/// The getter and setter of one row of [`message!`].
macro_rules! accessors {
    (value $(#[$doc:meta])* $get:ident / $set:ident : $ty:ty = $place:expr) => {
        $crate::cm::layout::accessors!(@get $(#[$doc])* $get: $ty = $place);
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            #[doc = concat!("Sets [`", stringify!($get), "`](Self::", stringify!($get), ").")]
            pub fn $set(&mut self, v: $ty) {
                $crate::cm::layout::Access::<$ty>::set(&$place, self.b_mut(), v);
            }
        }
    };
    (array $(#[$doc:meta])* $get:ident / $set:ident : $ty:ty = $place:expr) => {
        $crate::cm::layout::accessors!(@get $(#[$doc])* $get: $ty = $place);
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            #[doc = concat!("Sets [`", stringify!($get), "`](Self::", stringify!($get), ").")]
            pub fn $set(&mut self, v: &$ty) {
                $crate::cm::layout::Access::<$ty>::set(&$place, self.b_mut(), *v);
            }
        }
    };
    (@get $(#[$doc:meta])* $get:ident : $ty:ty = $place:expr) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $(#[$doc])*
            pub fn $get(&self) -> $ty {
                $crate::cm::layout::Access::<$ty>::get(&$place, self.b())
            }
        }
    };
    (bytes $(#[$doc:meta])* $get:ident / $get_mut:ident : $ty:ty = $place:expr) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $(#[$doc])*
            pub fn $get(&self) -> &[u8] {
                &self.b()[$place]
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            #[doc = concat!("[`", stringify!($get), "`](Self::", stringify!($get), "), writable.")]
            pub fn $get_mut(&mut self) -> &mut [u8] {
                &mut self.b_mut()[$place]
            }
        }
    };
    (path $(#[$doc:meta])* $get:ident / $get_mut:ident : $ty:ty = $place:expr) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $(#[$doc])*
            pub fn $get(&self) -> $crate::cm::path::Packet<&[u8]> {
                $crate::cm::path::Packet::new_unchecked(&self.b()[$place])
            }
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            #[doc = concat!("[`", stringify!($get), "`](Self::", stringify!($get), "), writable.")]
            pub fn $get_mut(&mut self) -> $crate::cm::path::Packet<&mut [u8]> {
                $crate::cm::path::Packet::new_unchecked(&mut self.b_mut()[$place])
            }
        }
    };
}
pub(crate) use accessors;

/// How `parse` of [`message!`] reads one row.
macro_rules! parse_field {
    (path $packet:ident, $get:ident, $place:expr) => {
        $crate::cm::PathRepr::parse(&$packet.$get())?
    };
    (bytes $packet:ident, $get:ident, $place:expr) => {
        $crate::cm::layout::Access::get(&$place, $packet.b())
    };
    ($kind:ident $packet:ident, $get:ident, $place:expr) => {
        $packet.$get()
    };
}
pub(crate) use parse_field;

/// How `emit` of [`message!`] writes one row.
macro_rules! emit_field {
    (value $repr:ident, $packet:ident, $get:ident, $set:ident) => {
        $packet.$set($repr.$get)
    };
    (array $repr:ident, $packet:ident, $get:ident, $set:ident) => {
        $packet.$set(&$repr.$get)
    };
    (bytes $repr:ident, $packet:ident, $get:ident, $set:ident) => {
        $packet.$set().copy_from_slice(&$repr.$get)
    };
    (path $repr:ident, $packet:ident, $get:ident, $set:ident) => {
        $repr.$get.emit(&mut $packet.$set())
    };
}
pub(crate) use emit_field;

/// The tests every message and path shares, over the module's `PACKET_BYTES` and `repr()`:
/// `test_parse`, `test_emit`, `test_truncated` (`$len` is the length as a literal, so a change
/// of the constant shows) and, given a frame number, `test_capture_bytes`.
#[cfg(test)]
macro_rules! message_tests {
    ($repr:ident, $what:literal, $len:literal $(, frame $frame:literal)?) => {
        $(
            #[test]
            fn test_capture_bytes() {
                assert_eq!(PACKET_BYTES, $crate::cm::test_util::capture_data($frame));
            }
        )?

        #[test]
        fn test_parse() {
            let p = Packet::new_unchecked(&PACKET_BYTES[..]);
            assert_eq!($repr::parse(&p).unwrap(), repr());
        }

        #[test]
        fn test_emit() {
            let mut bytes = [0xa5u8; $len];
            repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
            assert_eq!(bytes, PACKET_BYTES);
        }

        #[test]
        fn test_truncated() {
            assert_eq!(
                Packet::new_checked(&PACKET_BYTES[..$len - 1]).unwrap_err(),
                $crate::Error::Truncated {
                    what: $what,
                    need: $len,
                    have: $len - 1
                }
            );
        }
    };
}
#[cfg(test)]
pub(crate) use message_tests;
