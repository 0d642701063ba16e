//! Recipe parsing and validation, through the real binary.
