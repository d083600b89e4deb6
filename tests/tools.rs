//! Installs and locates the external tools tests need (Python virtual environments under `target/test-tools/`, Debian packages).
