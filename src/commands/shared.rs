//! What a stack's shared (s3://) backend says of it, for `status` and `history`: the
//! newest runs every machine recorded there, and who holds its lease now.

use crate::backend::Where;
use crate::error::Result;
use crate::run::lock::lease::{self, Holder};
use crate::run::records::{self, RunRecord};
use crate::workspace::Workspace;

/// The backend's view of a stack.
pub struct Shared {
    /// The backend URL, credentials masked.
    pub backend: String,
    /// Newest first.
    pub runs: Vec<RunRecord>,
    /// The lease's holder (`None`: free).
    pub holder: Option<Holder>,
}

/// What the backend of `ws` says of `stack`, when it is a bucket (`None` otherwise):
/// its newest `limit` runs and its lease. Records that cannot be read are left out,
/// saying so on stderr.
pub fn read(ws: &Workspace, stack: &str, limit: usize) -> Result<Option<Shared>> {
    let env = crate::pipeline::env::pulumi_env(ws);
    let Where::S3(backend) = Where::of(&env)? else {
        return Ok(None);
    };
    let runs = records::recent(&backend, stack, limit, &mut |w| eprintln!("warning: {w}"))?;
    let holder = lease::read(&backend, stack)?
        .and_then(|f| f.holder)
        .filter(|h| !h.released);
    Ok(Some(Shared {
        backend: backend.name.clone(),
        runs,
        holder,
    }))
}

impl Shared {
    /// The lease as a line: `held by …` or `free`.
    pub fn lease_line(&self) -> String {
        match &self.holder {
            Some(h) => format!("lease: held by {}", h.describe()),
            None => "lease: free".into(),
        }
    }

    /// The lease as JSON: `{"held": false}` or its holder.
    pub fn lease_json(&self) -> serde_json::Value {
        match &self.holder {
            Some(h) => serde_json::json!({
                "held": true,
                "user": h.user,
                "host": h.host,
                "pid": h.pid,
                "run_id": h.run_id,
                "command": h.command,
                "since": h.since,
            }),
            None => serde_json::json!({ "held": false }),
        }
    }
}
