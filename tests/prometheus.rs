//! A real Prometheus server for tests: installed from Debian's `prometheus` package, started on 127.0.0.1.
