//! The update pass (up and preview): the program's resources in order, then deletes of
//! what it no longer declares, then the stack's outputs; checked against `up --plan`
//! and recorded for `preview --save-plan`.

use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};

use super::pass::PassRun;
use super::runner::Pass;
use super::{Outcome, hook_json};
use crate::clock::now_rfc3339;
use crate::config::display_string;
use crate::eval;
use crate::program::{self, Kind, STACK_REF_TYPE, STACK_TYPE};
use crate::secret;
use crate::signals;
use crate::state::{ORG, Resource, urn};

impl PassRun<'_, '_> {
    pub(super) fn update(&mut self) -> Pass {
        let r = self.r;
        let old_by_urn: HashMap<&str, &Resource> =
            r.old.iter().map(|x| (x.urn.as_str(), x)).collect();
        let old_stack = old_by_urn.get(self.stack_urn.as_str()).copied();
        let stack_op = if old_stack.is_some() {
            "same"
        } else {
            "create"
        };
        let mut stack_res = self.stack_resource(
            old_stack,
            old_stack.map(|s| s.outputs.clone()).unwrap_or_default(),
        );
        self.d.pre(stack_op, old_stack, Some(&stack_res));

        let program_urns: HashSet<String> = r
            .program
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                Kind::Resource { ty, .. } => Some(urn(&r.st.name, &r.st.project.name, ty, &n.name)),
                Kind::Variable(_) => None,
            })
            .collect();
        let deletes: Vec<&Resource> = r
            .old
            .iter()
            .rev()
            .filter(|x| x.ty != STACK_TYPE && !program_urns.contains(&x.urn))
            .collect();
        self.set_slices(r.program.resource_count() + deletes.len() + 1);
        let fail = self.failing();
        let fail_at = r
            .program
            .nodes
            .iter()
            .rposition(|n| matches!(n.kind, Kind::Resource { .. }));

        let mut values: BTreeMap<String, Value> = BTreeMap::new();
        let mut done: Vec<Resource> = Vec::new();
        let mut touched: HashSet<String> = HashSet::new();
        let mut outcome = Outcome::Ok;
        let mut changed = stack_op != "same";
        let now = now_rfc3339();
        // The stack registers first: its step is checked against the plan first.
        if let Some(Err(e)) = self
            .check
            .as_mut()
            .map(|c| c.check_step(&self.stack_urn, stack_op))
        {
            let urn = self.stack_urn.clone();
            self.d.diag(&urn, "error", &e);
            outcome = Outcome::Rejected;
        }

        for (idx, node) in r.program.nodes.iter().enumerate() {
            if outcome != Outcome::Ok {
                break;
            }
            if signals::cancelled() {
                outcome = Outcome::Cancelled;
                break;
            }
            let ectx = eval::Ctx {
                project: &r.st.project.name,
                stack: &r.st.name,
                org: ORG,
                config: r.config,
                nodes: &values,
            };
            let (ty, props) = match &node.kind {
                Kind::Variable(v) => {
                    let v = ectx.eval(v);
                    values.insert(node.name.clone(), v);
                    continue;
                }
                Kind::Resource { ty, props, .. } => (ty, props),
            };
            let inputs = match ectx.eval(props) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            let res_urn = urn(&r.st.name, &r.st.project.name, ty, &node.name);
            let prev = old_by_urn.get(res_urn.as_str()).copied();
            let is_ref = ty == STACK_REF_TYPE;
            let mut res = Resource {
                urn: res_urn.clone(),
                custom: true,
                id: format!("{}-id", node.name),
                ty: ty.clone(),
                inputs: inputs.clone(),
                outputs: inputs.clone(),
                parent: self.stack_urn.clone(),
                dependencies: Vec::new(),
                provider: String::new(),
                created: prev
                    .map(|p| p.created.clone())
                    .unwrap_or_else(|| now.clone()),
                modified: now.clone(),
            };
            if is_ref {
                let name =
                    display_string(&secret::reveal(inputs.get("name").unwrap_or(&Value::Null)));
                res.id = name.clone();
                match program::read_stack_reference(&r.st.backend, &name, &r.st.project.name) {
                    Ok(outs) => {
                        let secret_names: Vec<&String> = outs
                            .iter()
                            .filter(|(_, v)| secret::is_secret(v))
                            .map(|(k, _)| k)
                            .collect();
                        res.outputs = json!({
                            "name": name,
                            "outputs": outs,
                            "secretOutputNames": secret_names,
                        })
                        .as_object()
                        .cloned()
                        .unwrap_or_default();
                    }
                    Err(msg) => {
                        self.d.pre("read", prev, Some(&res));
                        self.fail_step("read", prev, Some(&res), &msg);
                        outcome = Outcome::Failed;
                        break;
                    }
                }
            }
            let op = match (prev, is_ref) {
                (None, true) => "read",
                (None, false) => "create",
                (Some(p), true) if p.outputs == res.outputs => "same",
                (Some(_), true) => "read",
                (Some(p), false) if p.inputs == res.inputs => "same",
                (Some(_), false) => "update",
            };
            // Under a plan, a resource whose inputs or step leave it fails before its step
            // starts (no resourcePreEvent, no resOpFailedEvent). StackReference reads are
            // not in plans and are not checked.
            if !is_ref && let Some(c) = self.check.as_mut() {
                let verdict = c
                    .check_goal(&res_urn, prev.map(|p| &p.inputs), &res.inputs)
                    .and_then(|()| c.check_step(&res_urn, op));
                if let Err(e) = verdict {
                    self.d.diag(&res_urn, "error", &e);
                    outcome = Outcome::Rejected;
                    break;
                }
            }
            if !is_ref && let Some(rec) = self.record.as_mut() {
                rec.resource(&res, prev.map(|p| &p.inputs), op);
            }
            let fails_here = fail && Some(idx) == fail_at;
            // A step that fails is doing something: an unchanged resource is being updated.
            let op = if fails_here && op == "same" {
                "update"
            } else {
                op
            };
            if op == "same" {
                res.modified = prev.map(|p| p.modified.clone()).unwrap_or_default();
            } else {
                changed = true;
            }
            self.d.pre(op, prev, Some(&res));
            let interrupted = self.pause();
            if fails_here {
                let msg = self.fail_message();
                self.fail_step(op, prev, Some(&res), &msg);
                outcome = Outcome::Failed;
                break;
            }
            self.d.done(op, prev, Some(&res));
            let mut value = Value::Object(res.outputs.clone());
            value["id"] = json!(res.id);
            value["urn"] = json!(res.urn);
            values.insert(node.name.clone(), value);
            touched.insert(res.urn.clone());
            done.push(res);
            if interrupted {
                outcome = Outcome::Cancelled;
                break;
            }
        }

        let mut deleted: HashSet<String> = HashSet::new();
        if outcome == Outcome::Ok {
            for x in &deletes {
                if signals::cancelled() {
                    outcome = Outcome::Cancelled;
                    break;
                }
                if let Some(Err(e)) = self.check.as_mut().map(|c| c.check_step(&x.urn, "delete")) {
                    let urn = self.stack_urn.clone();
                    self.d.diag(&urn, "error", &e);
                    outcome = Outcome::Rejected;
                    break;
                }
                if let Some(rec) = self.record.as_mut() {
                    rec.delete(&x.urn);
                }
                changed = true;
                self.d.pre("delete", Some(x), None);
                let interrupted = self.pause();
                self.d.done("delete", Some(x), None);
                deleted.insert(x.urn.clone());
                if interrupted {
                    outcome = Outcome::Cancelled;
                    break;
                }
            }
        }

        let mut stack_outputs = None;
        if outcome == Outcome::Ok {
            if self.pause() {
                outcome = Outcome::Cancelled;
            } else if fail && fail_at.is_none() {
                outcome = Outcome::Failed;
            } else {
                let empty = Map::new();
                let old_outputs = old_stack.map(|s| &s.outputs).unwrap_or(&empty);
                match self.stack_outputs(&values) {
                    // The real CLI fails such an update without saying why.
                    Ok(outs)
                        if self.check.as_ref().is_some_and(|c| {
                            c.check_outputs(&self.stack_urn, old_outputs, &outs)
                                .is_err()
                        }) =>
                    {
                        outcome = Outcome::Rejected;
                    }
                    Ok(outs) => {
                        if Some(&outs) != old_stack.map(|s| &s.outputs) {
                            changed = true;
                        }
                        stack_res.outputs = outs.clone();
                        if let Some(rec) = self.record.as_mut() {
                            rec.stack(&stack_res, old_stack.map(|s| &s.outputs), stack_op);
                        }
                        self.d.done(stack_op, old_stack, Some(&stack_res));
                        stack_outputs = Some(outs);
                    }
                    Err(msg) => {
                        let urn = self.stack_urn.clone();
                        self.d.diag(&urn, "error", &msg);
                        outcome = Outcome::Failed;
                    }
                }
            }
        }
        self.close(outcome, stack_outputs.as_ref());

        let mut resources = vec![stack_res];
        resources.extend(done);
        resources.extend(
            r.old
                .iter()
                .filter(|x| {
                    x.ty != STACK_TYPE && !touched.contains(&x.urn) && !deleted.contains(&x.urn)
                })
                .cloned(),
        );
        Pass {
            outcome,
            resources,
            changed,
            recorded: self.record.take(),
        }
    }

    /// The program's `outputs:` plus the `FAKE_PULUMI_OUTPUTS_<P>` and
    /// `FAKE_PULUMI_SECRET_OUTPUTS_<P>` hooks.
    fn stack_outputs(
        &self,
        values: &BTreeMap<String, Value>,
    ) -> std::result::Result<Map<String, Value>, String> {
        let r = self.r;
        let ectx = eval::Ctx {
            project: &r.st.project.name,
            stack: &r.st.name,
            org: ORG,
            config: r.config,
            nodes: values,
        };
        let mut outs = Map::new();
        for (k, v) in &r.program.outputs {
            outs.insert(k.clone(), ectx.eval(v));
        }
        for (k, v) in hook_json("OUTPUTS", &r.key).map_err(|f| f.msg)? {
            outs.insert(k, v);
        }
        for (k, v) in hook_json("SECRET_OUTPUTS", &r.key).map_err(|f| f.msg)? {
            outs.insert(k, secret::wrap(v));
        }
        Ok(outs)
    }
}
