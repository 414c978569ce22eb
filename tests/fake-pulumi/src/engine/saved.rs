//! The stack state as the engine reads it (secrets decrypted) and records it after a
//! pass (secrets encrypted with the stack's key).

use serde_json::{Map, Value};

use super::runner::{Pass, Runner};
use crate::clock::now_rfc3339;
use crate::crypto;
use crate::error::Result;
use crate::secret;
use crate::state::{Resource, StackState};

/// The state's resources with secrets decrypted (with the salt the state records).
pub(super) fn decrypt_state(state: &StackState) -> Result<Vec<Resource>> {
    let any = state.resources.iter().any(|r| {
        secret::contains_secret(&Value::Object(r.outputs.clone()))
            || secret::contains_secret(&Value::Object(r.inputs.clone()))
    });
    if !any {
        return Ok(state.resources.clone());
    }
    let c = crate::commands::state_crypter(state)?;
    let dec = |m: &Map<String, Value>| -> Result<Map<String, Value>> {
        secret::decrypt_tree(&Value::Object(m.clone()), &c)
            .map(|v| v.as_object().cloned().unwrap_or_default())
            .map_err(|_| crypto::incorrect_passphrase())
    };
    state
        .resources
        .iter()
        .map(|r| {
            Ok(Resource {
                inputs: dec(&r.inputs)?,
                outputs: dec(&r.outputs)?,
                ..r.clone()
            })
        })
        .collect()
}

impl Runner<'_> {
    pub(super) fn save(&self, pass: &Pass) -> Result<()> {
        let enc = |m: &Map<String, Value>| {
            secret::encrypt_tree(&Value::Object(m.clone()), self.crypter)
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        let resources = pass
            .resources
            .iter()
            .map(|r| Resource {
                inputs: enc(&r.inputs),
                outputs: enc(&r.outputs),
                ..r.clone()
            })
            .collect();
        let state = StackState {
            salt: self.salt.clone(),
            last_update: Some(now_rfc3339()),
            resources,
        };
        self.st
            .backend
            .save(&self.st.project.name, &self.st.name, &state)
    }
}
