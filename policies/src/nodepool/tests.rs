//! NodePool tests.
