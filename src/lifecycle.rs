//! The process's life as requests see it, shared by every serving thread: serving;
//! draining (after SIGTERM: `/readyz` answers 503 so the load balancer stops sending, while
//! everything is still served); and closing (the grace period is over: each open stream
//! ends with a final JSON-RPC error frame saying the gateway is shutting down, so clients
//! resubscribe elsewhere instead of seeing a cut connection).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Where the process is in its life.
#[derive(Debug, Default)]
pub struct Lifecycle {
    draining: AtomicBool,
    closing: CancellationToken,
}

impl Lifecycle {
    /// Whether the gateway wants new traffic (`/readyz`).
    pub fn is_ready(&self) -> bool {
        !self.draining.load(Relaxed)
    }

    /// Stops wanting new traffic; everything is still served.
    pub fn drain(&self) {
        self.draining.store(true, Relaxed);
    }

    /// Ends every open stream with its final frame.
    pub fn close_streams(&self) {
        self.draining.store(true, Relaxed);
        self.closing.cancel();
    }

    /// Resolves once open streams must end (`close_streams`).
    pub fn closing(&self) -> WaitForCancellationFutureOwned {
        self.closing.clone().cancelled_owned()
    }
}
