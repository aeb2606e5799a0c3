//! Components fetched and compiled once per process, however many
//! attempts of one start at once ([`Runner::prepared`]).

use super::Runner;
use crate::sandbox::Prepared;

impl Runner {
    /// The component compiled and linked in this process. The first
    /// attempt of a component not compiled here yet fetches and compiles
    /// it; the other attempts of it wait their turn and find it compiled,
    /// instead of each fetching its bytes and compiling a copy at once (a
    /// claim of 60 attempts of a new component read its bytes 60 times).
    pub(super) async fn prepared(&self, digest: &str) -> Result<Prepared, String> {
        let cached = || self.sandbox.prepare(digest, &[]).map_err(|e| e.to_string());
        if self.sandbox.is_prepared(digest) {
            return cached();
        }
        let turn = self
            .compiling
            .lock()
            .expect("compiling")
            .entry(digest.to_string())
            .or_default()
            .clone();
        let _turn = turn.lock().await;
        if self.sandbox.is_prepared(digest) {
            return cached();
        }
        let bytes = self
            .store
            .component_bytes(digest)
            .await
            .map_err(|e| e.to_string())?;
        let sandbox = self.sandbox.clone();
        let digest = digest.to_string();
        tokio::task::spawn_blocking(move || sandbox.prepare(&digest, &bytes))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}
