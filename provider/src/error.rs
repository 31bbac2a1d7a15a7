//! Errors of the verbs calls, each with the errno that libibverbs returns for it.

use core::fmt;

/// Why a verbs call failed. `errno()` gives the value the C ABI returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// `EINVAL`: an argument is invalid (the reason says which).
    InvalidArgument(&'static str),
    /// `EBUSY`: the object is in use (a memory window is bound to the MR, ...).
    Busy(&'static str),
    /// `EAGAIN`: a resource is exhausted for now; retry later.
    TryAgain(&'static str),
    /// `ENOMEM`: out of memory, or a table is full.
    NoMemory(&'static str),
    /// `ENOENT`: no such object (an unknown handle or key).
    NotFound(&'static str),
    /// `EOPNOTSUPP`: the operation is not supported.
    NotSupported(&'static str),
    /// `EFAULT`: memory handed to a registration is not mapped, or lacks a permission.
    BadAddress(&'static str),
    /// `EIO`, with the OS error of a transport.
    Io(i32),
}

impl Error {
    /// The errno for this error, as libibverbs returns it.
    pub fn errno(&self) -> i32 {
        match self {
            Error::InvalidArgument(_) => 22, // EINVAL
            Error::Busy(_) => 16,            // EBUSY
            Error::TryAgain(_) => 11,        // EAGAIN
            Error::NoMemory(_) => 12,        // ENOMEM
            Error::NotFound(_) => 2,         // ENOENT
            Error::NotSupported(_) => 95,    // EOPNOTSUPP
            Error::BadAddress(_) => 14,      // EFAULT
            Error::Io(e) => *e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::Busy(why) => write!(f, "busy: {why}"),
            Error::TryAgain(why) => write!(f, "try again: {why}"),
            Error::NoMemory(why) => write!(f, "out of memory: {why}"),
            Error::NotFound(why) => write!(f, "not found: {why}"),
            Error::NotSupported(why) => write!(f, "not supported: {why}"),
            Error::BadAddress(why) => write!(f, "bad address: {why}"),
            Error::Io(e) => write!(f, "I/O error: {}", std::io::Error::from_raw_os_error(*e)),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e.raw_os_error().unwrap_or(5))
    }
}

/// The result type of the provider.
pub type Result<T> = core::result::Result<T, Error>;
