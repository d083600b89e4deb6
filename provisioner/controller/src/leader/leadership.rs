//! [`Leadership`]: whether this replica leads, as the writers see it.

use tokio::sync::watch;

use crate::ControllerError;

/// Whether this replica leads: a cheap clonable handle on the elector's state. Writers check it
/// before every write ([`Leadership::ensure_leader`]) and stop the moment it is lost
/// ([`Leadership::lost`]).
#[derive(Debug, Clone)]
pub struct Leadership {
    pub(super) rx: watch::Receiver<bool>,
}

impl Leadership {
    /// Leadership that is always held and never lost (`--leader-elect=false`).
    pub fn always() -> Self {
        let (_, rx) = watch::channel(true);
        Self { rx }
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// `Ok` when this replica leads, [`ControllerError::NotLeader`] otherwise.
    pub fn ensure_leader(&self) -> Result<(), ControllerError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(ControllerError::NotLeader)
        }
    }

    /// Waits for the next change and returns the new state; `None` once no change can come (the
    /// elector is gone, or leadership is [`Leadership::always`]).
    pub async fn changed(&mut self) -> Option<bool> {
        self.rx.changed().await.ok()?;
        Some(*self.rx.borrow_and_update())
    }

    /// Waits until this replica leads (at once if it does): `true`, or `false` when the elector
    /// stopped without leading.
    pub async fn acquired(&mut self) -> bool {
        self.rx.wait_for(|leader| *leader).await.is_ok()
    }

    /// Resolves once this replica does not lead (at once if it does not): the signal to stop all
    /// writes. Never resolves for [`Leadership::always`].
    pub async fn lost(&mut self) {
        if self.rx.wait_for(|leader| !*leader).await.is_err() {
            // The elector is gone while leading: only `always()` gets here (an elector
            // clears leadership when dropped).
            std::future::pending::<()>().await;
        }
    }

    /// A receiver of the state (`true` while leading), for `tokio::select!` loops.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }
}
