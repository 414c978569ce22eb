//! Output contracts: what other projects read of a project's stack outputs, and the
//! reads an update would break — an output read that its saved plan no longer has
//! (removed or renamed), or whose type it changes. A preview names each; a `policy:`
//! rule can deny them as the change kind `output-removed`. (Who reads what is found in
//! `pipeline::execute::context`; a step checks its plan in `run::step::contracts`.)

use serde_json::{Map, Value};

use crate::engine::digest::{self, Changes};

/// The change kind broken reads are counted as, for `policy:` rules.
pub const KIND: &str = "output-removed";

/// One read of a project's output by another project.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Read {
    /// The project that reads it.
    pub reader: String,
    pub output: String,
    /// Where it is read: `file:line`, the file from the workspace's root.
    pub at: String,
}

/// The reads among `reads` that outputs `planned` (after the update) break, given the
/// outputs `now` (deployed): an output read that is there now and not after, or whose
/// type changes (a value whose type is not known until the update, or is secret, is no
/// change of type).
pub fn breaks(
    reads: &[Read],
    planned: &Map<String, Value>,
    now: &Map<String, Value>,
) -> Vec<String> {
    let known = |v: &Value| {
        (!crate::engine::contains_secret_mask(v))
            .then(|| digest::value_type(v))
            .flatten()
    };
    let mut out: Vec<String> = reads
        .iter()
        .filter_map(|r| match (now.get(&r.output), planned.get(&r.output)) {
            (Some(_), None) => Some(format!(
                "removes output `{}`, which {} reads ({})",
                r.output, r.reader, r.at
            )),
            (Some(old), Some(new)) => match (known(old), known(new)) {
                (Some(a), Some(b)) if a != b => Some(format!(
                    "changes output `{}` from a {a} to a {b}, which {} reads ({})",
                    r.output, r.reader, r.at
                )),
                _ => None,
            },
            _ => None,
        })
        .collect();
    out.dedup();
    out
}

/// `changes` with `broken` reads counted as changes of kind [`KIND`] (each named as its
/// description), so `policy:` rules judge them with the resources' changes.
pub fn count_into(changes: &mut Changes, broken: &[String]) {
    if broken.is_empty() {
        return;
    }
    *changes.counts.entry(KIND.to_string()).or_default() += broken.len() as u64;
    changes
        .steps
        .extend(broken.iter().map(|b| (KIND.to_string(), b.clone())));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn read(output: &str) -> Read {
        Read {
            reader: "cluster".into(),
            output: output.into(),
            at: "projects/cluster/Pulumi.yaml:12".into(),
        }
    }

    #[test]
    fn a_read_output_removed_or_retyped_breaks_a_new_or_unknown_one_does_not() {
        let now = map(
            json!({"cidr": "10.0.0.0/16", "gw": "10.0.0.1", "ports": [80], "token": "[secret]", "zone": "a"}),
        );
        let planned = map(json!({
            "gw": 1, "ports": [443], "token": "x",
            "zone": digest::UNKNOWN, "new": "n"
        }));
        let reads: Vec<Read> = ["cidr", "gw", "ports", "token", "zone", "new", "never"]
            .into_iter()
            .map(read)
            .collect();
        assert_eq!(
            breaks(&reads, &planned, &now),
            [
                "removes output `cidr`, which cluster reads (projects/cluster/Pulumi.yaml:12)",
                "changes output `gw` from a string to a number, which cluster reads (projects/cluster/Pulumi.yaml:12)",
            ]
        );
        let mut changes = Changes::default();
        count_into(&mut changes, &breaks(&reads, &planned, &now));
        assert_eq!(changes.count(KIND), 2);
        assert!(!changes.any(), "a broken read is no resource change");
        count_into(&mut changes, &[]);
        assert_eq!(changes.steps.len(), 2);
    }
}
