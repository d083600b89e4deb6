//! Quartermaster's Azure cloud (work in progress).
