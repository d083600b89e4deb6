//! moto's server on 127.0.0.1, installed by the harness (PyPI `moto[server]` in the venv
//! `target/test-tools/moto`) and shared by the tests of this binary: each test takes
//! [`Moto::lock`], which resets moto's state (`POST /moto-api/reset`) before handing it over.
//!
//! The server runs in a small Python process that stops it when its standard input closes,
//! so it goes away with the test process even though a shared server is never dropped; a
//! [`Moto`] that is dropped kills it at once.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use quartermaster_tests::tools::moto_python;
use tokio::sync::{Mutex, MutexGuard};

/// Starts moto's `ThreadedMotoServer` (the server `moto_server` runs) on the port given, and
/// stops it when stdin reaches end of file.
const SERVER_SCRIPT: &str = r#"
import sys
from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()
server.stop()
"#;

/// A running moto server.
pub struct Moto {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static SHARED: OnceLock<Result<Moto, String>> = OnceLock::new();
static TURN: Mutex<()> = Mutex::const_new(());

/// One test's use of the shared server (the state was reset when it was handed over).
pub struct MotoTurn {
    /// The server's address.
    pub addr: SocketAddr,
    _turn: MutexGuard<'static, ()>,
}

impl Moto {
    /// Installs moto when needed and starts it on a free port.
    pub fn start() -> Result<Moto, String> {
        let python = moto_python()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free port: {e}"))?
            .port();
        let mut child = Command::new(&python)
            .arg("-c")
            .arg(SERVER_SCRIPT)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting moto with {}: {e}", python.display()))?;
        let stdout = child.stdout.take().ok_or("moto's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading moto's output: {e}"))?;
        if line.trim() != "ready" {
            let _ = child.kill();
            return Err(format!("moto did not start (said {line:?})"));
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(addr).is_err() {
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("moto did not listen on {addr} within a minute"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Moto { child, addr })
    }

    /// The shared server, reset, for the calling test alone until the turn is dropped.
    pub async fn lock() -> MotoTurn {
        let turn = TURN.lock().await;
        let moto = SHARED
            .get_or_init(Moto::start)
            .as_ref()
            .unwrap_or_else(|e| panic!("moto: {e}"));
        reset(moto.addr).await;
        MotoTurn {
            addr: moto.addr,
            _turn: turn,
        }
    }
}

/// `POST /moto-api/reset`: every emulated resource is forgotten.
async fn reset(addr: SocketAddr) {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connecting to moto");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP handshake with moto");
    tokio::spawn(conn);
    let request = http::Request::post("/moto-api/reset")
        .header("host", addr.to_string())
        .body(Empty::<bytes::Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("moto reset");
    let status = response.status();
    let _ = response.into_body().collect().await;
    assert!(status.is_success(), "moto reset answered {status}");
}
