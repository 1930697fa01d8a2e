//! The scripted HTTP/2 server: it accepts connections (cleartext or TLS with ALPN `h2`),
//! reads the client's preface and frames on a reader task (which acknowledges SETTINGS,
//! answers PINGs and tracks the flow-control windows the client grants), and hands each
//! connection to a script. Like `hyperium/h2`'s `tests/h2-support`, but only what the
//! hostile cases need.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};

use super::frames::*;
use crate::harness::{Io, Scheme};

/// What a connection runs.
pub type Script = for<'a> fn(&'a mut Peer) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One frame the client sent.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// Flow-control windows granted by the client (RFC 9113 §6.9).
struct Windows {
    connection: i64,
    initial: i64,
    /// Increments per stream (on top of `initial`), minus what was sent.
    streams: HashMap<u32, i64>,
}

struct Shared {
    /// Frames the client got wrong (RFC 9113 §4.2, §6.5, §6.7), for the case to report.
    violations: Arc<Mutex<Vec<String>>>,
    paused: AtomicBool,
    /// (the script sent its SETTINGS, a client SETTINGS awaits its ACK): nothing is sent
    /// before the script's own SETTINGS, so a silent server stays silent.
    greeted: Mutex<(bool, bool)>,
    max_frame: AtomicU32,
    windows: Mutex<Windows>,
    changed: Notify,
}

/// One accepted connection, as a script sees it.
pub struct Peer {
    writer: Arc<tokio::sync::Mutex<WriteHalf<Box<dyn Io>>>>,
    frames: mpsc::UnboundedReceiver<Frame>,
    shared: Arc<Shared>,
    last_stream: u32,
    /// The reader task, which owns the socket's read half: aborted with the peer, so the
    /// socket closes even while reading is stopped.
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Peer {
    fn start(
        io: Box<dyn Io>,
        violations: Arc<Mutex<Vec<String>>>,
    ) -> (Peer, watch::Receiver<bool>) {
        let (reader, writer) = tokio::io::split(io);
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        let shared = Arc::new(Shared {
            violations,
            paused: AtomicBool::new(false),
            greeted: Mutex::new((false, false)),
            max_frame: AtomicU32::new(MIN_FRAME as u32),
            windows: Mutex::new(Windows {
                connection: 65_535,
                initial: 65_535,
                streams: HashMap::new(),
            }),
            changed: Notify::new(),
        });
        let (tx, frames) = mpsc::unbounded_channel();
        let (closed_tx, closed) = watch::channel(false);
        let reader = tokio::spawn(read_frames(
            reader,
            writer.clone(),
            shared.clone(),
            tx,
            closed_tx,
        ));
        let peer = Peer {
            writer,
            frames,
            shared,
            last_stream: 0,
            reader,
        };
        (peer, closed)
    }

    /// Writes raw bytes; false once the client is gone.
    pub async fn send(&self, bytes: &[u8]) -> bool {
        let mut writer = self.writer.lock().await;
        writer.write_all(bytes).await.is_ok() && writer.flush().await.is_ok()
    }

    /// The server's connection preface: a SETTINGS frame with `params`.
    /// Acknowledges the client's SETTINGS if they came first.
    pub async fn hello(&self, params: &[(u16, u32)]) -> bool {
        let mut writer = self.writer.lock().await;
        let mut bytes = settings(params);
        if std::mem::replace(&mut *self.shared.greeted.lock().unwrap(), (true, false)).1 {
            bytes.extend(settings_ack());
        }
        writer.write_all(&bytes).await.is_ok() && writer.flush().await.is_ok()
    }

    /// The next frame the client sent (`None` once it closed).
    pub async fn frame(&mut self) -> Option<Frame> {
        self.frames.recv().await
    }

    /// The stream id of the next request the client opens (its HEADERS frame).
    pub async fn request(&mut self) -> Option<u32> {
        loop {
            let frame = self.frame().await?;
            if frame.kind == HEADERS {
                self.last_stream = self.last_stream.max(frame.stream);
                return Some(frame.stream);
            }
        }
    }

    /// The highest stream id the script has seen a request on.
    pub fn last_stream(&self) -> u32 {
        self.last_stream
    }

    /// Stops reading from the socket (the client's writes then back up).
    pub fn stop_reading(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
    }

    /// The client's SETTINGS_MAX_FRAME_SIZE (16 KiB until it says otherwise).
    pub fn max_frame(&self) -> usize {
        self.shared.max_frame.load(Ordering::SeqCst) as usize
    }

    /// The client's SETTINGS_INITIAL_WINDOW_SIZE.
    pub fn initial_window(&self) -> usize {
        self.shared.windows.lock().unwrap().initial as usize
    }

    /// Sends `prefix` and then `filler` bytes up to `total` bytes as DATA on `stream`,
    /// never more than the client's windows allow (waiting for WINDOW_UPDATE); false once
    /// the client is gone.
    pub async fn send_within_window(&self, stream: u32, prefix: &[u8], total: u64) -> bool {
        let mut sent = 0u64;
        let mut payload = Vec::with_capacity(self.max_frame());
        while sent < total {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let available = {
                let mut w = self.shared.windows.lock().unwrap();
                let stream_window = w.initial + w.streams.get(&stream).copied().unwrap_or(0);
                let n = w
                    .connection
                    .min(stream_window)
                    .min(self.max_frame() as i64)
                    .min((total - sent) as i64);
                if n > 0 {
                    w.connection -= n;
                    *w.streams.entry(stream).or_insert(0) -= n;
                }
                n
            };
            if available <= 0 {
                changed.await;
                continue;
            }
            payload.clear();
            let from = (sent as usize).min(prefix.len());
            let to = (sent as usize + available as usize).min(prefix.len());
            payload.extend_from_slice(&prefix[from..to]);
            payload.resize(available as usize, b'x');
            if !self.send(&data(stream, &payload, false)).await {
                return false;
            }
            sent += available as u64;
        }
        true
    }

    /// Closes the sending side (TCP FIN; TLS close_notify first).
    pub async fn close(&self) {
        let _ = self.writer.lock().await.shutdown().await;
    }
}

/// The reader task: preface, then frames; SETTINGS are acknowledged and PINGs answered
/// here, so scripts only deal with what they care about.
async fn read_frames(
    mut reader: ReadHalf<Box<dyn Io>>,
    writer: Arc<tokio::sync::Mutex<WriteHalf<Box<dyn Io>>>>,
    shared: Arc<Shared>,
    frames: mpsc::UnboundedSender<Frame>,
    closed: watch::Sender<bool>,
) {
    let mut preface = [0u8; 24];
    if reader.read_exact(&mut preface).await.is_ok() {
        while let Some(frame) = read_frame(&mut reader, &shared).await {
            let reply = match frame.kind {
                SETTINGS if frame.flags & ACK == 0 => {
                    apply_settings(&shared, &frame.payload);
                    let mut greeted = shared.greeted.lock().unwrap();
                    greeted.1 = !greeted.0;
                    greeted.0.then(settings_ack)
                }
                PING if frame.flags & ACK == 0 && shared.greeted.lock().unwrap().0 => {
                    Some(ping(ACK, &frame.payload))
                }
                WINDOW_UPDATE if frame.payload.len() == 4 => {
                    let inc = u32::from_be_bytes(frame.payload[..4].try_into().unwrap());
                    let mut w = shared.windows.lock().unwrap();
                    match frame.stream {
                        0 => w.connection += i64::from(inc & 0x7fff_ffff),
                        s => *w.streams.entry(s).or_insert(0) += i64::from(inc & 0x7fff_ffff),
                    }
                    shared.changed.notify_waiters();
                    None
                }
                _ => None,
            };
            if let Some(reply) = reply {
                let mut w = writer.lock().await;
                if w.write_all(&reply).await.is_err() || w.flush().await.is_err() {
                    break;
                }
            }
            if frames.send(frame).is_err() {
                break;
            }
        }
    }
    let _ = closed.send(true);
}

async fn read_frame(reader: &mut ReadHalf<Box<dyn Io>>, shared: &Shared) -> Option<Frame> {
    if shared.paused.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    let mut head = [0u8; 9];
    reader.read_exact(&mut head).await.ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0; len];
    reader.read_exact(&mut payload).await.ok()?;
    let violation = match head[3] {
        _ if len > MIN_FRAME => Some(format!(
            "a frame of {len} bytes (our MAX_FRAME_SIZE is {MIN_FRAME})"
        )),
        PING if len != 8 => Some(format!("a PING of {len} bytes")),
        SETTINGS if !len.is_multiple_of(6) => Some(format!("a SETTINGS frame of {len} bytes")),
        WINDOW_UPDATE if len != 4 => Some(format!("a WINDOW_UPDATE of {len} bytes")),
        _ => None,
    };
    if let Some(violation) = violation {
        shared
            .violations
            .lock()
            .unwrap()
            .push(format!("the gateway sent {violation}"));
    }
    Some(Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff,
        payload,
    })
}

fn apply_settings(shared: &Shared, payload: &[u8]) {
    for param in payload.chunks_exact(6) {
        let id = u16::from_be_bytes([param[0], param[1]]);
        let value = u32::from_be_bytes([param[2], param[3], param[4], param[5]]);
        match id {
            SETTINGS_MAX_FRAME_SIZE => shared.max_frame.store(value, Ordering::SeqCst),
            SETTINGS_INITIAL_WINDOW_SIZE => {
                shared.windows.lock().unwrap().initial = i64::from(value);
                shared.changed.notify_waiters();
            }
            _ => {}
        }
    }
}

/// A well-behaved gRPC server on one connection: every request gets `good_reply`.
pub async fn serve_well(peer: &mut Peer) {
    if !peer.hello(&[]).await {
        return;
    }
    while let Some(stream) = peer.request().await {
        if !peer.send(&good_reply(stream)).await {
            return;
        }
    }
}

/// Which connections run the hostile script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// Only the first connection; later ones are served well (so a call after the case
    /// shows the gateway recovered).
    First,
    /// Every connection.
    Every,
}

/// A running scripted server; stopped when dropped.
pub struct Server {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicUsize>,
    violations: Arc<Mutex<Vec<String>>>,
    /// Connections with an index below this are closed.
    release: watch::Sender<usize>,
    accept: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Listens on 127.0.0.1:0, with `scheme` (TLS with ALPN `h2`: `Scheme::accept`).
    pub async fn spawn(script: Script, hostile: Hostile, scheme: Scheme) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (release, released) = watch::channel(0usize);
        let counter = accepted.clone();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let seen = violations.clone();
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = tcp.set_nodelay(true);
                let index = counter.fetch_add(1, Ordering::SeqCst);
                let mut released = released.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Some(io) = scheme.accept(tcp).await else {
                        return;
                    };
                    let (mut peer, mut closed) = Peer::start(io, seen);
                    let hostile_here = hostile == Hostile::Every || index == 0;
                    let run = async {
                        match hostile_here {
                            true => script(&mut peer).await,
                            false => serve_well(&mut peer).await,
                        }
                        // The connection stays open until the client closes it or the
                        // case releases it.
                        std::future::pending::<()>().await
                    };
                    let release = tokio::select! {
                        _ = run => false,
                        _ = released.wait_for(|n| index < *n) => true,
                        _ = closed.wait_for(|c| *c) => false,
                    };
                    if release {
                        // As a server that shuts down: GOAWAY, then close (the gateway's
                        // next call must go to a new connection and succeed).
                        let bye = goaway(peer.last_stream(), 0);
                        let closing = async {
                            peer.send(&bye).await;
                            peer.close().await;
                        };
                        let _ = tokio::time::timeout(Duration::from_millis(200), closing).await;
                    }
                });
            }
        });
        Server {
            addr,
            accepted,
            violations,
            release,
            accept,
        }
    }

    /// What the gateway got wrong on the wire, so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// Closes every connection accepted so far (later ones are still served).
    pub fn release(&self) {
        let _ = self.release.send(self.accepted.load(Ordering::SeqCst));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.release.send(usize::MAX);
        self.accept.abort();
    }
}
