//! A real Prometheus server for tests: installed from Debian's `prometheus` package, started on 127.0.0.1.
//!
//! [`Prometheus::start`] installs the package when no `prometheus` is on PATH (`apt-get update`,
//! then `apt-get install -y --no-install-recommends prometheus`; the harness runs as root),
//! starts a server on a free loopback port with a temporary configuration and TSDB directory,
//! scraping the given targets every second, and kills it on drop. [`Exporter`] is a tiny
//! `/metrics` server for it to scrape: it serves whatever exposition text the test sets and
//! records when each scrape came and which text it got, so a test can compute what Prometheus
//! saw without asserting anything about wall-clock speed. [`http_get`] is a plain HTTP/1.0 GET.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::tools::tools_dir;

/// How long to wait for the server or a target before failing (a bound against hanging on a
/// broken setup, not a speed expectation).
const PATIENCE: Duration = Duration::from_secs(180);

/// The `prometheus` executable: on PATH, else installed from Debian's package.
pub fn prometheus_binary() -> Result<PathBuf, String> {
    if let Some(found) = on_path("prometheus") {
        return Ok(found);
    }
    // One installer at a time (threads and processes).
    let tools = tools_dir();
    fs::create_dir_all(&tools).map_err(|e| format!("creating {}: {e}", tools.display()))?;
    let lock_path = tools.join("prometheus-apt.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("creating the lock file {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    if let Some(found) = on_path("prometheus") {
        return Ok(found);
    }
    eprintln!("prometheus is not installed: installing Debian's `prometheus` package");
    apt(&["update"])?;
    apt(&["install", "-y", "--no-install-recommends", "prometheus"])?;
    on_path("prometheus").ok_or_else(|| {
        "apt-get installed `prometheus` but no `prometheus` executable is on PATH".to_owned()
    })
}

fn apt(args: &[&str]) -> Result<(), String> {
    eprintln!("running: apt-get {}", args.join(" "));
    // Another apt on the machine (a first boot's unattended upgrade) holds the dpkg lock for a
    // while: wait for it rather than fail.
    let out = Command::new("apt-get")
        .args(["-o", "DPkg::Lock::Timeout=600"])
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run apt-get (is this Debian?): {e}"))?;
    eprint!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`apt-get {}` failed ({}); installing packages needs root and access to Debian's \
             package archive",
            args.join(" "),
            out.status
        ))
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A free TCP port on 127.0.0.1 (bound, then released for the server to take).
pub fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding 127.0.0.1:0: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// A running Prometheus server; killed (and its directory removed) on drop.
pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    addr: SocketAddr,
}

impl Prometheus {
    /// Starts a server scraping `targets` (`host:port`, path `/metrics`) every second, and waits
    /// until it is ready.
    pub fn start(targets: &[String]) -> Result<Self, String> {
        let binary = prometheus_binary()?;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "qm-prometheus-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("data"))
            .map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let quoted: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: test\n    static_configs:\n      - targets: [{}]\n",
            quoted.join(", ")
        );
        let config_path = dir.join("prometheus.yml");
        fs::write(&config_path, config)
            .map_err(|e| format!("writing {}: {e}", config_path.display()))?;
        let port = free_port()?;
        let log_path = dir.join("prometheus.log");
        let log =
            File::create(&log_path).map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut server = Self {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
            addr,
        };
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "prometheus exited ({status}) before it was ready:\n{}",
                    server.log()
                ));
            }
            if matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "prometheus was not ready within {PATIENCE:?}:\n{}",
                    server.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until every target has been scraped successfully (health `up`).
    pub fn wait_until_targets_up(&self) -> Result<(), String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok((200, body)) = http_get(self.addr, "/api/v1/targets?state=active") {
                let up = body.matches("\"health\":\"up\"").count();
                let all = body.matches("\"health\":").count();
                if all > 0 && up == all {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "targets not up within {PATIENCE:?}:\n{:?}\n{}",
                    http_get(self.addr, "/api/v1/targets"),
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Its temporary directory (configuration, TSDB, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A plain HTTP/1.0 GET: `(status, body)`.
pub fn http_get(addr: SocketAddr, path_and_query: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\nAccept: */*\r\n\r\n"
    )
    .map_err(|e| format!("writing to {addr}: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("reading from {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}{path_and_query}: no HTTP header in {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{addr}{path_and_query}: bad status line in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// One scrape the exporter served: when it arrived and which body (by the index the test gave
/// with [`Exporter::serve`]) it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scrape {
    /// Arrival, by the system clock (the clock Prometheus stamps samples with).
    pub at: SystemTime,
    /// The `phase` of the body served.
    pub phase: usize,
}

struct ExporterState {
    body: String,
    phase: usize,
    scrapes: Vec<Scrape>,
}

/// A `/metrics` server on a free 127.0.0.1 port, serving the text set by [`Exporter::serve`];
/// stopped on drop.
pub struct Exporter {
    addr: SocketAddr,
    state: Arc<(Mutex<ExporterState>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Starts serving an empty exposition (phase 0).
    pub fn start() -> Result<Self, String> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding 127.0.0.1:0: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let state = Arc::new((
            Mutex::new(ExporterState {
                body: String::new(),
                phase: 0,
                scrapes: Vec::new(),
            }),
            Condvar::new(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => answer(stream, &state),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        Ok(Self {
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// `127.0.0.1:PORT`, as a scrape target.
    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// Serves `body` from now on, recording scrapes as `phase`.
    pub fn serve(&self, phase: usize, body: &str) {
        let mut s = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
        s.body = body.to_owned();
        s.phase = phase;
    }

    /// Waits until `count` scrapes of `phase` have been served; returns every scrape so far.
    pub fn wait_for_scrapes(&self, phase: usize, count: usize) -> Result<Vec<Scrape>, String> {
        let deadline = Instant::now() + PATIENCE;
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if s.scrapes.iter().filter(|x| x.phase == phase).count() >= count {
                return Ok(s.scrapes.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "{count} scrapes of phase {phase} not served within {PATIENCE:?} (got {:?})",
                    s.scrapes
                ));
            }
            s = cv
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Every scrape so far.
    pub fn scrapes(&self) -> Vec<Scrape> {
        self.state
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .scrapes
            .clone()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut stream: TcpStream, state: &(Mutex<ExporterState>, Condvar)) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    // Read the request head.
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let request = String::from_utf8_lossy(&head);
    let is_metrics = request
        .split_whitespace()
        .nth(1)
        .is_some_and(|p| p == "/metrics" || p.starts_with("/metrics?"));
    let (status, body) = if is_metrics {
        let (lock, cv) = state;
        let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
        let scrape = Scrape {
            at: SystemTime::now(),
            phase: s.phase,
        };
        s.scrapes.push(scrape);
        cv.notify_all();
        ("200 OK", s.body.clone())
    } else {
        ("404 Not Found", "not found\n".to_owned())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}
