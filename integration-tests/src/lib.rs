//! Integration tests that drive real processes live in tests/.
