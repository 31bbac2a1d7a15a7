//! Transports (being written).
