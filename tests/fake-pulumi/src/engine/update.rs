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
use crate::program::{self, Kind, Node, Program, STACK_REF_TYPE, STACK_TYPE};
use crate::secret;
use crate::signals;
use crate::state::{ORG, Resource, urn};

/// What the saved state means for this pass.
struct Before<'a> {
    /// The saved resources by URN.
    by_urn: HashMap<&'a str, &'a Resource>,
    /// The saved stack resource, once the stack has been updated.
    stack: Option<&'a Resource>,
    /// The stack resource's step: `create` the first time, then `same`.
    stack_op: &'static str,
    /// The saved resources the program no longer declares, last first.
    deletes: Vec<&'a Resource>,
}

/// What the pass has done so far.
struct Progress {
    outcome: Outcome,
    /// Whether a step changes the stack (for `--expect-no-changes`).
    changed: bool,
    /// The variables and stepped resources, by name, for the expressions after them.
    values: BTreeMap<String, Value>,
    /// The program's resources after their step, in program order.
    done: Vec<Resource>,
    /// The URNs deleted because the program no longer declares them.
    deleted: HashSet<String>,
    /// When this pass's steps happen (a resource's `created` and `modified`).
    now: String,
}

/// Where the fail hook strikes: the program's last resource, or the stack's outputs
/// when the program declares none.
#[derive(Clone, Copy)]
struct FailHook {
    armed: bool,
    at: Option<usize>,
}

impl FailHook {
    /// The hook's step in this program (`armed`: the hook applies to this pass).
    fn of(armed: bool, program: &Program) -> Self {
        let at = program
            .nodes
            .iter()
            .rposition(|n| matches!(n.kind, Kind::Resource { .. }));
        FailHook { armed, at }
    }

    /// Whether the program node at `idx` fails.
    fn fails_node(self, idx: usize) -> bool {
        self.armed && Some(idx) == self.at
    }

    /// Whether the stack's outputs fail (no resource to fail instead).
    fn fails_outputs(self) -> bool {
        self.armed && self.at.is_none()
    }
}

impl<'a> PassRun<'a, '_> {
    /// The update (or its preview): the stack registers, the program's nodes step in
    /// order, what it no longer declares is deleted, the stack's outputs complete it.
    pub(super) fn update(&mut self) -> Pass {
        let r = self.r;
        let before = self.before();
        let old_outputs = before.stack.map(|s| s.outputs.clone());
        let mut stack_res = self.stack_resource(before.stack, old_outputs.unwrap_or_default());
        self.d.pre(before.stack_op, before.stack, Some(&stack_res));
        self.set_slices(r.program.resource_count() + before.deletes.len() + 1);
        let fail = FailHook::of(self.failing(), r.program);
        let mut p = Progress {
            outcome: Outcome::Ok,
            changed: before.stack_op != "same",
            values: BTreeMap::new(),
            done: Vec::new(),
            deleted: HashSet::new(),
            now: now_rfc3339(),
        };
        let stack_urn = self.stack_urn.clone();
        if !self.step_in_plan(&stack_urn, before.stack_op) {
            p.outcome = Outcome::Rejected;
        }
        for (idx, node) in r.program.nodes.iter().enumerate() {
            if p.outcome != Outcome::Ok {
                break;
            }
            self.node_step(&mut p, &before, node, fail.fails_node(idx));
        }
        if p.outcome == Outcome::Ok {
            self.delete_steps(&mut p, &before.deletes);
        }
        let mut outputs = None;
        if p.outcome == Outcome::Ok {
            outputs = self.finish_stack(&mut p, &before, &mut stack_res, fail);
        }
        self.close(p.outcome, outputs.as_ref());
        let (outcome, changed) = (p.outcome, p.changed);
        Pass {
            outcome,
            resources: self.resources_after(stack_res, p),
            changed,
            recorded: self.record.take(),
        }
    }

    /// The saved resources by URN, the stack's own step, and what is to be deleted.
    fn before(&self) -> Before<'a> {
        let r = self.r;
        let by_urn: HashMap<&str, &Resource> = r.old.iter().map(|x| (x.urn.as_str(), x)).collect();
        let stack = by_urn.get(self.stack_urn.as_str()).copied();
        let declared: HashSet<String> = r
            .program
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                Kind::Resource { ty, .. } => Some(self.resource_urn(ty, &n.name)),
                Kind::Variable(_) => None,
            })
            .collect();
        let deletes = r
            .old
            .iter()
            .rev()
            .filter(|x| x.ty != STACK_TYPE && !declared.contains(&x.urn))
            .collect();
        Before {
            by_urn,
            stack,
            stack_op: if stack.is_some() { "same" } else { "create" },
            deletes,
        }
    }

    /// The URN of the resource a node declares in this stack.
    fn resource_urn(&self, ty: &str, name: &str) -> String {
        urn(&self.r.st.name, &self.r.st.project.name, ty, name)
    }

    /// The expression context: this stack, its config, and the nodes evaluated so far.
    fn eval_ctx<'v>(&'v self, values: &'v BTreeMap<String, Value>) -> eval::Ctx<'v> {
        let r = self.r;
        eval::Ctx {
            project: &r.st.project.name,
            stack: &r.st.name,
            org: ORG,
            config: r.config,
            nodes: values,
        }
    }

    /// Under `up --plan`, whether the plan holds this step; if not, its error is the
    /// stack's diagnostic.
    fn step_in_plan(&mut self, urn: &str, op: &str) -> bool {
        match self.check.as_mut().map(|c| c.check_step(urn, op)) {
            Some(Err(e)) => {
                let stack_urn = self.stack_urn.clone();
                self.d.diag(&stack_urn, "error", &e);
                false
            }
            _ => true,
        }
    }

    /// One program node, unless a cancel arrived: a variable is evaluated, a resource
    /// takes its step.
    fn node_step(&mut self, p: &mut Progress, before: &Before, node: &Node, fails_here: bool) {
        if signals::cancelled() {
            p.outcome = Outcome::Cancelled;
            return;
        }
        match &node.kind {
            Kind::Variable(v) => {
                let v = self.eval_ctx(&p.values).eval(v);
                p.values.insert(node.name.clone(), v);
            }
            Kind::Resource { ty, props, .. } => {
                let prev = before
                    .by_urn
                    .get(self.resource_urn(ty, &node.name).as_str());
                let res = self.declare(p, &node.name, ty, props, prev.copied());
                self.resource_step(p, &node.name, res, prev.copied(), fails_here);
            }
        }
    }

    /// The resource a node declares: its evaluated inputs (its outputs too, until read),
    /// under the stack; created when first stepped, modified now.
    fn declare(
        &self,
        p: &Progress,
        name: &str,
        ty: &str,
        props: &Value,
        prev: Option<&Resource>,
    ) -> Resource {
        let inputs = match self.eval_ctx(&p.values).eval(props) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Resource {
            urn: self.resource_urn(ty, name),
            custom: true,
            id: format!("{name}-id"),
            ty: ty.to_string(),
            inputs: inputs.clone(),
            outputs: inputs,
            parent: self.stack_urn.clone(),
            dependencies: Vec::new(),
            provider: String::new(),
            created: prev.map_or_else(|| p.now.clone(), |old| old.created.clone()),
            modified: p.now.clone(),
        }
    }

    /// A resource's step: a stack reference is read, the step checked against the plan
    /// and recorded, then its events (or its failure); its value joins the nodes.
    fn resource_step(
        &mut self,
        p: &mut Progress,
        name: &str,
        mut res: Resource,
        prev: Option<&Resource>,
        fails_here: bool,
    ) {
        let is_ref = res.ty == STACK_REF_TYPE;
        if is_ref && let Err(msg) = self.read_reference(&mut res) {
            self.d.pre("read", prev, Some(&res));
            self.fail_step("read", prev, Some(&res), &msg);
            p.outcome = Outcome::Failed;
            return;
        }
        let op = step_op(prev, &res, is_ref);
        // StackReference reads are not in plans and are not checked.
        if !is_ref && !self.planned(&res, prev, op) {
            p.outcome = Outcome::Rejected;
            return;
        }
        // A step that fails is doing something: an unchanged resource is being updated.
        let op = if fails_here && op == "same" {
            "update"
        } else {
            op
        };
        if op == "same" {
            res.modified = prev.map(|p| p.modified.clone()).unwrap_or_default();
        } else {
            p.changed = true;
        }
        self.d.pre(op, prev, Some(&res));
        let interrupted = self.pause();
        if fails_here {
            let msg = self.fail_message();
            self.fail_step(op, prev, Some(&res), &msg);
            p.outcome = Outcome::Failed;
            return;
        }
        self.d.done(op, prev, Some(&res));
        p.values.insert(name.to_string(), resource_value(&res));
        p.done.push(res);
        if interrupted {
            p.outcome = Outcome::Cancelled;
        }
    }

    /// A StackReference's read: its id is the referenced stack's name, its outputs that
    /// stack's outputs and which of them are secret.
    fn read_reference(&self, res: &mut Resource) -> std::result::Result<(), String> {
        let r = self.r;
        let name = display_string(&secret::reveal(
            res.inputs.get("name").unwrap_or(&Value::Null),
        ));
        res.id = name.clone();
        let outs = program::read_stack_reference(&r.st.backend, &name, &r.st.project.name)?;
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
        Ok(())
    }

    /// Under `up --plan`, whether the resource's inputs and step stay in the plan (if
    /// not, its error: it fails before its step starts, with no step event); under
    /// `preview --save-plan`, records its step.
    fn planned(&mut self, res: &Resource, prev: Option<&Resource>, op: &str) -> bool {
        if let Some(c) = self.check.as_mut() {
            let verdict = c
                .check_goal(&res.urn, prev.map(|p| &p.inputs), &res.inputs)
                .and_then(|()| c.check_step(&res.urn, op));
            if let Err(e) = verdict {
                self.d.diag(&res.urn, "error", &e);
                return false;
            }
        }
        if let Some(rec) = self.record.as_mut() {
            rec.resource(res, prev.map(|p| &p.inputs), op);
        }
        true
    }

    /// Deletes what the program no longer declares, last first, until a cancel or a
    /// step the plan does not hold.
    fn delete_steps(&mut self, p: &mut Progress, deletes: &[&Resource]) {
        for x in deletes {
            if signals::cancelled() {
                p.outcome = Outcome::Cancelled;
                return;
            }
            if !self.step_in_plan(&x.urn, "delete") {
                p.outcome = Outcome::Rejected;
                return;
            }
            if let Some(rec) = self.record.as_mut() {
                rec.delete(&x.urn);
            }
            p.changed = true;
            self.d.pre("delete", Some(x), None);
            let interrupted = self.pause();
            self.d.done("delete", Some(x), None);
            p.deleted.insert(x.urn.clone());
            if interrupted {
                p.outcome = Outcome::Cancelled;
                return;
            }
        }
    }

    /// The stack's own step completes last, with its outputs (the fail hook strikes
    /// here when the program declares no resource); the outputs, if it completes.
    fn finish_stack(
        &mut self,
        p: &mut Progress,
        before: &Before,
        stack_res: &mut Resource,
        fail: FailHook,
    ) -> Option<Map<String, Value>> {
        if self.pause() {
            p.outcome = Outcome::Cancelled;
            return None;
        }
        if fail.fails_outputs() {
            p.outcome = Outcome::Failed;
            return None;
        }
        match self.stack_outputs(&p.values) {
            Ok(outs) => self.register_outputs(p, before, stack_res, outs),
            Err(msg) => {
                let urn = self.stack_urn.clone();
                self.d.diag(&urn, "error", &msg);
                p.outcome = Outcome::Failed;
                None
            }
        }
    }

    /// The stack's outputs, checked against the plan (the real CLI fails an update that
    /// leaves it without saying why) and recorded; the stack's step completes with them.
    fn register_outputs(
        &mut self,
        p: &mut Progress,
        before: &Before,
        stack_res: &mut Resource,
        outs: Map<String, Value>,
    ) -> Option<Map<String, Value>> {
        let old_outputs = before.stack.map(|s| &s.outputs);
        let empty = Map::new();
        if self.check.as_ref().is_some_and(|c| {
            c.check_outputs(&self.stack_urn, old_outputs.unwrap_or(&empty), &outs)
                .is_err()
        }) {
            p.outcome = Outcome::Rejected;
            return None;
        }
        if Some(&outs) != old_outputs {
            p.changed = true;
        }
        stack_res.outputs = outs.clone();
        if let Some(rec) = self.record.as_mut() {
            rec.stack(stack_res, old_outputs, before.stack_op);
        }
        self.d.done(before.stack_op, before.stack, Some(stack_res));
        Some(outs)
    }

    /// The stack's resources after the pass: the stack, the program's stepped resources,
    /// then the saved ones neither stepped nor deleted.
    fn resources_after(&self, stack_res: Resource, p: Progress) -> Vec<Resource> {
        let stepped: HashSet<&str> = p.done.iter().map(|x| x.urn.as_str()).collect();
        let kept: Vec<Resource> = self
            .r
            .old
            .iter()
            .filter(|x| {
                x.ty != STACK_TYPE
                    && !stepped.contains(x.urn.as_str())
                    && !p.deleted.contains(&x.urn)
            })
            .cloned()
            .collect();
        let mut resources = vec![stack_res];
        resources.extend(p.done);
        resources.extend(kept);
        resources
    }

    /// The program's `outputs:` plus the `FAKE_PULUMI_OUTPUTS_<P>` and
    /// `FAKE_PULUMI_SECRET_OUTPUTS_<P>` hooks.
    fn stack_outputs(
        &self,
        values: &BTreeMap<String, Value>,
    ) -> std::result::Result<Map<String, Value>, String> {
        let r = self.r;
        let ectx = self.eval_ctx(values);
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

/// The step a resource takes: a stack reference is read unless its outputs are
/// unchanged; a resource is created, updated when its inputs changed, else the same.
fn step_op(prev: Option<&Resource>, res: &Resource, is_ref: bool) -> &'static str {
    match (prev, is_ref) {
        (None, true) => "read",
        (None, false) => "create",
        (Some(p), true) if p.outputs == res.outputs => "same",
        (Some(_), true) => "read",
        (Some(p), false) if p.inputs == res.inputs => "same",
        (Some(_), false) => "update",
    }
}

/// A stepped resource's value for the expressions after it: its outputs, id and urn.
fn resource_value(res: &Resource) -> Value {
    let mut value = Value::Object(res.outputs.clone());
    value["id"] = json!(res.id);
    value["urn"] = json!(res.urn);
    value
}
