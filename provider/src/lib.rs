//! softrnic-provider: not yet written (see the open issues).
