//! `.strata/<stack>/approvals/<project-slug>/` (and, on a bucket backend, the same under
//! `.strata/approvals/<stack>/` in the bucket, for every machine): the plan an `approve:`
//! rule holds (`plan.json`, Pulumi's saved update plan), what it changes (`held.json`: its
//! digest and change summary) and, once someone approved it, who and when
//! (`approval.json`). A later `up` applies the approved plan only while a fresh preview
//! plans the same changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::engine::digest::{CHANGING, Changes};
use crate::error::{Error, Result};
use crate::util::slug;

/// What a held plan changes: the change counts and the resources, as its preview said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Summary {
    /// Operation → count, of the kinds that change something (`same` left out).
    #[serde(default)]
    pub counts: BTreeMap<String, u64>,
    /// `(operation, URN)`, sorted.
    #[serde(default)]
    pub steps: Vec<(String, String)>,
}

impl Summary {
    /// "The plan changed" means: another resource, another operation on a resource, or
    /// another count of a changing kind. The file itself (its timestamps, the order
    /// Pulumi wrote its steps in, resources left the same) does not count.
    pub fn of(changes: &Changes) -> Summary {
        let counts = CHANGING
            .iter()
            .map(|k| (k.to_string(), changes.count(k)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let mut steps = changes.steps.clone();
        steps.sort();
        Summary { counts, steps }
    }

    /// How the plan `now` differs from this approved one, for people.
    pub fn changed_to(&self, now: &Summary) -> String {
        if self == now {
            format!(
                "the same resources change ({}), to other values",
                now.short()
            )
        } else {
            format!("approved {}, now {}", self.short(), now.short())
        }
    }

    /// `+1 ~2 -0 ±0`.
    pub fn short(&self) -> String {
        let n = |k: &str| self.counts.get(k).copied().unwrap_or(0);
        format!(
            "+{} ~{} -{} ±{}",
            n("create"),
            n("update"),
            n("delete"),
            n("replace")
        )
    }
}

/// What an update plan file (`preview --save-plan`) binds the update to: its config and
/// each resource's goal and steps, which `pulumi up --plan` checks the update against.
/// Left out is what differs between two previews of the same program: the manifest's
/// time, each resource's random seed and planned state, and each secret's ciphertext
/// (fresh at every encryption; a secret whose value changed is thus no change here, and
/// Pulumi's own check refuses that update). `None` when the text is not a plan.
fn plan_terms(text: &[u8]) -> Option<Value> {
    let doc: Value = serde_json::from_slice(text).ok()?;
    doc.get("manifest")?;
    let resources: serde_json::Map<String, Value> = doc
        .get("resourcePlans")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(urn, p)| {
            let goal = p.get("goal").map(masked);
            (
                urn.clone(),
                json!({ "goal": goal, "steps": p.get("steps") }),
            )
        })
        .collect();
    let config: serde_json::Map<String, Value> = doc
        .get("config")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| match v.get("secure") {
            Some(_) => (k.clone(), Value::from("[secure]")),
            None => (k.clone(), v.clone()),
        })
        .collect();
    Some(json!({ "config": config, "resources": resources }))
}

/// True when the update plan files `a` and `b` bind an update to the same changes
/// (`plan_terms`): applying one applies the other's changes. False when either cannot be
/// read as a plan.
pub fn same_plan(a: &Path, b: &Path) -> bool {
    let terms = |p: &Path| std::fs::read(p).ok().and_then(|b| plan_terms(&b));
    match (terms(a), terms(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `v` with each secret (a value carrying Pulumi's secret signature) as `[secret]`.
fn masked(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.contains_key(crate::engine::SECRET_SIG_KEY) => {
            Value::from("[secret]")
        }
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), masked(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(masked).collect()),
        other => other.clone(),
    }
}

/// A plan held at a gate (`held.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub project: String,
    pub stack: String,
    /// The run that held it.
    pub run_id: String,
    /// The `approve:` rule that holds it, and why.
    pub rule: String,
    pub reason: String,
    /// sha256 of `plan.json`.
    pub digest: String,
    pub summary: Summary,
    pub held_at: String,
}

/// An approval of a held plan (`approval.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// `user@host`.
    pub by: String,
    pub at: String,
    /// The digest of the plan approved: an approval of another plan is none.
    pub digest: String,
}

/// One project's held and approved plans: its folder in `.strata/<stack>/approvals/`
/// and, when the stack's backend is a bucket, the same three objects under
/// `.strata/approvals/<stack>/<project-slug>/` there, which every machine sees (the
/// bucket is then the truth: the folder keeps the copy Pulumi reads the plan from).
pub struct Gate {
    dir: PathBuf,
    shared: Option<(Arc<Backend>, String)>,
}

const PLAN: &str = "plan.json";
const HELD: &str = "held.json";
const APPROVAL: &str = "approval.json";

impl Gate {
    pub fn of(state_dir: &Path, project: &str) -> Gate {
        Gate {
            dir: state_dir.join("approvals").join(slug(project)),
            shared: None,
        }
    }

    /// The gate kept in `backend` too, where every machine on the stack sees it.
    pub fn shared_in(mut self, backend: Option<Arc<Backend>>, stack: &str, project: &str) -> Gate {
        self.shared = backend.map(|b| {
            let folder = b.key(&format!(".strata/approvals/{stack}/{}/", slug(project)));
            (b, folder)
        });
        self
    }

    /// Where the plan is read from by `pulumi up --plan` (on a shared gate, the copy
    /// [`Gate::approval`] fetched).
    pub fn plan_file(&self) -> PathBuf {
        self.dir.join(PLAN)
    }

    /// Keeps the plan a preview saved at `saved` as the held plan (replacing any held
    /// before, and any approval of it).
    pub fn hold(&self, saved: &Path, held: &mut Held) -> Result<()> {
        crate::files::private_dir(&self.dir)?;
        let bytes = std::fs::read(saved).map_err(|e| Error::io("read", saved, e))?;
        held.digest = crate::util::sha256_hex(&bytes);
        crate::files::write_private(&self.plan_file(), &bytes)?;
        self.write(HELD, held)?;
        self.forget_approval()?;
        if let Some((b, folder)) = &self.shared {
            b.delete(&format!("{folder}{APPROVAL}"))?;
            b.replace(&format!("{folder}{PLAN}"), &bytes)?;
            b.replace(&format!("{folder}{HELD}"), &json_bytes(held))?;
        }
        Ok(())
    }

    /// Whether this checkout holds a plan at the gate (its own copy: no request to a
    /// bucket).
    pub fn holds_here(&self) -> bool {
        self.dir.join(HELD).is_file()
    }

    /// The plan held, if any (on a shared gate, as the bucket has it).
    pub fn held(&self) -> Result<Option<Held>> {
        self.read(HELD)
    }

    /// The plan held, its file intact (the digest it was held with); on a shared gate
    /// its copy is fetched to [`Gate::plan_file`]. `Err` names what is wrong with it.
    pub fn held_intact(&self) -> Result<Option<Held>> {
        let Some(held) = self.held()? else {
            return Ok(None);
        };
        let bytes = self.fetch_plan()?.unwrap_or_default();
        if crate::util::sha256_hex(&bytes) != held.digest {
            return Err(Error::config(format!(
                "the plan held for `{}` ({}) is not the one its preview saved (changed or missing): not approving it. Run `strata up -s {}` to hold a fresh plan.",
                held.project,
                self.plan_where(),
                held.stack
            )));
        }
        Ok(Some(held))
    }

    /// The approval, when it is of the plan held now (same digest, file unchanged). A
    /// gate that cannot be read has none.
    pub fn approval(&self) -> Option<(Held, Approval)> {
        let a: Approval = self.read(APPROVAL).ok()??;
        let held = self.held_intact().ok()??;
        (a.digest == held.digest).then_some((held, a))
    }

    /// True when the plan a preview saved at `saved` binds the update to what the held
    /// plan does (`plan_terms`): applying the held plan then applies that preview's
    /// changes, and Pulumi's `up --plan` accepts it.
    pub fn holds_the_same_plan_as(&self, saved: &Path) -> bool {
        same_plan(&self.plan_file(), saved)
    }

    pub fn approve(&self, approval: &Approval) -> Result<()> {
        crate::files::private_dir(&self.dir)?;
        self.write(APPROVAL, approval)?;
        if let Some((b, folder)) = &self.shared {
            b.replace(&format!("{folder}{APPROVAL}"), &json_bytes(approval))?;
        }
        Ok(())
    }

    fn forget_approval(&self) -> Result<()> {
        remove(&self.dir.join(APPROVAL), |p| std::fs::remove_file(p))
    }

    /// Forgets everything held: the update it held went out.
    pub fn clear(&self) -> Result<()> {
        remove(&self.dir, |p| std::fs::remove_dir_all(p))?;
        if let Some((b, folder)) = &self.shared {
            for name in [APPROVAL, HELD, PLAN] {
                b.delete(&format!("{folder}{name}"))?;
            }
        }
        Ok(())
    }

    /// Where the held plan is, for messages.
    fn plan_where(&self) -> String {
        match &self.shared {
            Some((b, folder)) => format!("{folder}{PLAN} in {}", b.name),
            None => crate::util::display_path(&self.plan_file()),
        }
    }

    /// The held plan's bytes; on a shared gate fetched from the bucket into
    /// [`Gate::plan_file`].
    fn fetch_plan(&self) -> Result<Option<Vec<u8>>> {
        let Some((b, folder)) = &self.shared else {
            return Ok(std::fs::read(self.plan_file()).ok());
        };
        let Some(obj) = b.get(&format!("{folder}{PLAN}"))? else {
            return Ok(None);
        };
        crate::files::private_dir(&self.dir)?;
        crate::files::write_private(&self.plan_file(), &obj.body)?;
        Ok(Some(obj.body))
    }

    fn write(&self, name: &str, value: &impl Serialize) -> Result<()> {
        crate::files::write_private(&self.dir.join(name), &json_bytes(value))
    }

    /// `name` as the gate has it (the bucket's on a shared gate): `None` when it is not
    /// there or is not what it should be.
    fn read<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<Option<T>> {
        let bytes = match &self.shared {
            Some((b, folder)) => b.get(&format!("{folder}{name}"))?.map(|o| o.body),
            None => std::fs::read(self.dir.join(name)).ok(),
        };
        Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
    }
}

fn json_bytes(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

/// Removes `path` with `how`; one that is not there is no error.
fn remove(path: &Path, how: fn(&Path) -> std::io::Result<()>) -> Result<()> {
    match how(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(steps: &[(&str, &str)], same: u64) -> Changes {
        let mut c = Changes::default();
        for (op, urn) in steps {
            *c.counts.entry(op.to_string()).or_default() += 1;
            c.steps.push((op.to_string(), urn.to_string()));
        }
        c.counts.insert("same".into(), same);
        c
    }

    #[test]
    fn the_plan_changed_means_other_resources_or_operations_not_order_or_same() {
        let a = changes(&[("update", "urn:a"), ("delete", "urn:b")], 3);
        let reordered = changes(&[("delete", "urn:b"), ("update", "urn:a")], 7);
        assert_eq!(Summary::of(&a), Summary::of(&reordered));
        let other_op = changes(&[("replace", "urn:a"), ("delete", "urn:b")], 3);
        assert_ne!(Summary::of(&a), Summary::of(&other_op));
        let more = changes(
            &[
                ("update", "urn:a"),
                ("delete", "urn:b"),
                ("create", "urn:c"),
            ],
            3,
        );
        assert_ne!(Summary::of(&a), Summary::of(&more));
        assert_eq!(Summary::of(&a).short(), "+0 ~1 -1 ±0");
    }

    fn held() -> Held {
        Held {
            project: "db".into(),
            stack: "dev".into(),
            run_id: "r1".into(),
            rule: "review".into(),
            reason: "would update 1 resource".into(),
            digest: String::new(),
            summary: Summary::default(),
            held_at: "now".into(),
        }
    }

    #[test]
    fn an_approval_holds_only_for_the_plan_it_approved() {
        let d = tempfile::tempdir().unwrap();
        let gate = Gate::of(d.path(), "kube/db");
        let saved = d.path().join("saved.json");
        std::fs::write(&saved, "{\"plan\":1}").unwrap();
        let mut h = held();
        gate.hold(&saved, &mut h).unwrap();
        assert_eq!(h.digest, crate::util::sha256_hex(b"{\"plan\":1}"));
        assert_eq!(gate.held().unwrap(), Some(h.clone()));
        assert!(gate.approval().is_none(), "held, not approved");
        let a = Approval {
            by: "ann@box".into(),
            at: "t".into(),
            digest: h.digest.clone(),
        };
        gate.approve(&a).unwrap();
        assert_eq!(gate.approval(), Some((h.clone(), a.clone())));
        // The plan file edited after the approval: no approval.
        std::fs::write(gate.plan_file(), "{\"plan\":2}").unwrap();
        assert!(gate.approval().is_none());
        // A new plan held: the old approval goes.
        gate.approve(&a).unwrap();
        std::fs::write(&saved, "{\"plan\":3}").unwrap();
        gate.hold(&saved, &mut h).unwrap();
        assert!(gate.approval().is_none());
        gate.clear().unwrap();
        assert!(gate.held().unwrap().is_none());
        gate.clear().unwrap();
    }

    #[test]
    fn a_shared_gate_is_seen_from_every_checkout_and_the_plan_fetched_where_it_is_applied() {
        use object_store::memory::InMemory;
        let store = Arc::new(InMemory::new());
        let bucket = || {
            Some(Arc::new(
                Backend::new("s3://team".into(), store.clone(), "p/".into()).unwrap(),
            ))
        };
        let (a, b, c) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let gate = |d: &tempfile::TempDir| {
            Gate::of(d.path(), "kube/db").shared_in(bucket(), "dev", "kube/db")
        };
        let saved = a.path().join("saved.json");
        std::fs::write(&saved, "{\"plan\":1}").unwrap();
        let mut h = held();
        // The run on machine A holds it; a reviewer on machine B approves it.
        gate(&a).hold(&saved, &mut h).unwrap();
        assert_eq!(gate(&b).held_intact().unwrap(), Some(h.clone()));
        let approval = Approval {
            by: "ann@laptop".into(),
            at: "t".into(),
            digest: h.digest.clone(),
        };
        gate(&b).approve(&approval).unwrap();
        // A CI job on machine C, a fresh checkout, applies exactly that plan.
        let on_c = gate(&c);
        assert_eq!(on_c.approval(), Some((h.clone(), approval.clone())));
        assert_eq!(std::fs::read(on_c.plan_file()).unwrap(), b"{\"plan\":1}");
        // The plan in the bucket replaced after the approval: approved no more.
        let key = "p/.strata/approvals/dev/kube_2fdb/plan.json";
        bucket().unwrap().replace(key, b"{\"plan\":2}").unwrap();
        assert!(gate(&c).approval().is_none());
        gate(&b)
            .held_intact()
            .unwrap_err()
            .assert_says("not the one its preview saved");
        // Applied: gone from the bucket for everyone.
        gate(&c).clear().unwrap();
        assert!(gate(&b).held().unwrap().is_none());
        assert!(gate(&a).approval().is_none());
    }

    /// A real plan's shape (Pulumi v3.274.1, `preview --save-plan`), with `create` and
    /// each random part (time, seed, ciphertexts) as given.
    fn plan(create: &str, time: &str, seed: &str, cipher: &str) -> Vec<u8> {
        let secret = json!({ crate::engine::SECRET_SIG_KEY: crate::engine::SECRET_SIG, "ciphertext": cipher });
        json!({
            "manifest": { "time": time, "magic": "m", "version": "v3.274.1" },
            "config": { "lp:token": { "secure": cipher }, "lp:addr": "10.0.0.1" },
            "resourcePlans": {
                "urn:pulumi:dev::lp::command:local:Command::c": {
                    "goal": {
                        "type": "command:local:Command",
                        "inputDiff": { "updates": { "create": create, "environment": { "T": secret } } },
                        "outputDiff": {}
                    },
                    "steps": ["update"],
                    "state": { "create": create, "environment": { "T": secret } },
                    "seed": seed
                }
            }
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn two_previews_of_one_program_hold_the_same_plan_another_value_does_not() {
        let d = tempfile::tempdir().unwrap();
        let gate = Gate::of(d.path(), "kube/db");
        let saved = d.path().join("saved.json");
        std::fs::write(&saved, plan("echo v2", "t1", "s1", "v1:aaa")).unwrap();
        gate.hold(&saved, &mut held()).unwrap();
        std::fs::write(&saved, plan("echo v2", "t2", "s2", "v1:bbb")).unwrap();
        assert!(gate.holds_the_same_plan_as(&saved));
        std::fs::write(&saved, plan("echo v3", "t2", "s2", "v1:bbb")).unwrap();
        assert!(!gate.holds_the_same_plan_as(&saved));
        std::fs::write(&saved, "not a plan").unwrap();
        assert!(!gate.holds_the_same_plan_as(&saved));
        assert_eq!(
            Summary::default().changed_to(&Summary::default()),
            "the same resources change (+0 ~0 -0 ±0), to other values"
        );
    }
}
