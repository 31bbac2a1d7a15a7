//! softrnic-testbed: not yet written (see the open issues).
