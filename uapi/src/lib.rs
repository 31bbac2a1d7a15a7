//! softrnic-uapi: not yet written (see the open issues).
