//! What a `policy:` rule denied (or an `approve:` rule holds) in a project's planned
//! changes: the verdict a step's events, its result and the journal carry.

use serde::{Deserialize, Serialize};

/// What a `policy:` rule denied in a project's planned changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The rule's `name:`.
    pub rule: String,
    /// What it found, in words: `would delete 1 resource` or `would make 25 changes, more
    /// than 20`.
    pub reason: String,
    /// The resources it names (`delete aws:rds/instance:Instance db`), at most 20.
    pub resources: Vec<String>,
}

impl Denial {
    /// `held by prod-review: would update 1 resource (update …)`.
    pub fn describe_hold(&self) -> String {
        self.describe().replacen("denied by", "held by", 1)
    }

    /// `denied by keep-data: would delete 1 resource (delete …)`.
    pub fn describe(&self) -> String {
        let mut s = format!("denied by {}: {}", self.rule, self.reason);
        if !self.resources.is_empty() {
            s.push_str(&format!(" ({})", self.resources.join(", ")));
        }
        s
    }
}
