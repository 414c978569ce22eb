//! What a stack's shared (s3://) backend says of it, for `status` and `history`: the
//! newest runs every machine recorded there, and who holds its lease now.

use crate::backend::Where;
use crate::error::Result;
use crate::state::lock::lease::{self, Holder};
use crate::state::records::{self, RunRecord};
use crate::workspace::Workspace;

/// The backend's view of a stack.
pub struct Shared {
    /// The backend URL, credentials masked.
    pub backend: String,
    /// Newest first.
    pub runs: Vec<RunRecord>,
    /// The runs holding the lease, each for its projects (none: free).
    pub holders: Vec<Holder>,
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
    let holders = lease::read(&backend, stack)?
        .map(|f| f.holders)
        .unwrap_or_default();
    Ok(Some(Shared {
        backend: backend.name.clone(),
        runs,
        holders,
    }))
}

impl Shared {
    /// The lease as a line: `held by … for …` (each run, and what it holds) or `free`.
    pub fn lease_line(&self) -> String {
        if self.holders.is_empty() {
            return "lease: free".into();
        }
        let each: Vec<String> = self
            .holders
            .iter()
            .map(|h| format!("{} for {}", h.describe(), held_projects(h)))
            .collect();
        format!("lease: held by {}", each.join("; "))
    }

    /// The lease as JSON: `{"held": false}`, or each holder (the first one's fields also
    /// at the top, as before leases were per project).
    pub fn lease_json(&self) -> serde_json::Value {
        let one = |h: &Holder| {
            serde_json::json!({
                "user": h.user,
                "host": h.host,
                "pid": h.pid,
                "run_id": h.run_id,
                "command": h.command,
                "since": h.since,
                "projects": h.projects,
            })
        };
        let Some(first) = self.holders.first() else {
            return serde_json::json!({ "held": false, "holders": [] });
        };
        let mut doc = one(first);
        doc["held"] = true.into();
        doc["holders"] = self.holders.iter().map(one).collect();
        doc
    }
}

/// What a holder holds: its projects, or the whole environment.
fn held_projects(h: &Holder) -> String {
    match &h.projects {
        Some(p) => crate::util::list_some(p, 6),
        None => "the whole environment".into(),
    }
}
