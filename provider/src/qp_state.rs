//! The QP state machine (being written).
