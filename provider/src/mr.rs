//! The memory-region key table (being written).
