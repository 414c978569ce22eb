//! The engine operations (up, preview, refresh, destroy): checks in the CLI's order, then
//! a simulated run that streams events, honours the test hooks and records state.

use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::time::{Duration, Instant};

use crate::clock::now_rfc3339;
use crate::config::display_string;
use crate::crypto::{self, Crypter};
use crate::ctx::{Ctx, Stack};
use crate::display::{Display, Mode};
use crate::error::{Fail, Result, code};
use crate::eval;
use crate::output;
use crate::plan::{self, Plan, Recorder};
use crate::program::{self, Kind, Program, STACK_REF_TYPE, STACK_TYPE};
use crate::secret;
use crate::signals;
use crate::state::{ORG, Resource, StackState, urn};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Up,
    Preview,
    Refresh,
    Destroy,
}

impl Op {
    /// The name used by `FAKE_PULUMI_FAIL_<P>`.
    fn hook_name(self) -> &'static str {
        match self {
            Op::Up => "up",
            Op::Preview => "preview",
            Op::Refresh => "refresh",
            Op::Destroy => "destroy",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Op::Up => "update",
            Op::Preview => "preview",
            Op::Refresh => "refresh",
            Op::Destroy => "destroy",
        }
    }

    fn banner(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Op::Up, false) => "Updating",
            (Op::Refresh, false) => "Refreshing",
            (Op::Destroy, false) => "Destroying",
            (Op::Up | Op::Preview, _) => "Previewing update",
            (Op::Refresh, true) => "Previewing refresh",
            (Op::Destroy, true) => "Previewing destroy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Failed,
    Cancelled,
    /// The update would leave its plan (`up --plan`): exit 1, no "update failed" line.
    Rejected,
}

/// `FAKE_PULUMI_<NAME>_<P>`, else `FAKE_PULUMI_<NAME>`.
fn hook(name: &str, project_key: &str) -> Option<String> {
    std::env::var(format!("FAKE_PULUMI_{name}_{project_key}"))
        .or_else(|_| std::env::var(format!("FAKE_PULUMI_{name}")))
        .ok()
}

fn hook_json(name: &str, project_key: &str) -> Result<Map<String, Value>> {
    let Ok(text) = std::env::var(format!("FAKE_PULUMI_{name}_{project_key}")) else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(Fail::error(format!(
            "FAKE_PULUMI_{name}_{project_key} is not a JSON object: {text}"
        ))),
    }
}

/// Runs one engine command from the top.
pub fn run(ctx: &Ctx, op: Op) -> Result<()> {
    let skip_preview = ctx.args.bool("skip-preview");
    let interactive = ctx.interactive();
    // `refresh --preview-only` / `destroy --preview-only`: a dry run, like preview.
    let dry_only = op == Op::Preview
        || (matches!(op, Op::Refresh | Op::Destroy) && ctx.args.bool("preview-only"));
    if !dry_only && !interactive && !ctx.yes() && !skip_preview {
        return Err(Fail::config(
            "--yes or --skip-preview must be passed in to proceed when running in \
             non-interactive mode",
        ));
    }
    let st = ctx.require_stack()?;
    let pass = crypto::passphrase()?;
    let mut cfg = ctx.stack_config(&st.project, &st.name)?;
    let (crypter, _) = cfg.crypter(&pass)?;
    let stack_values = cfg.decrypted(Some(&crypter))?;
    let key = st.project.env_key();
    let (program, config) = if matches!(op, Op::Up | Op::Preview) {
        let config = program::effective_config(&st.project, &st.name, &stack_values)?;
        (Program::load(&st.project)?, config)
    } else {
        (Program::default(), stack_values.clone())
    };
    let streams = ctx.json() && !dry_only;
    check_expected_config(&key, &st.project, &config, streams)?;
    // `up --plan FILE` reads its plan before the engine starts.
    let plan = match ctx
        .args
        .value("plan")
        .filter(|p| op == Op::Up && !p.is_empty())
    {
        Some(path) => Some(plan::read(path, &crypter)?),
        None => None,
    };
    let old = decrypt_state(&st.state)?;

    if !dry_only && interactive && !ctx.yes() && !confirm(op) {
        output::print(&format!(
            "confirmation declined, not proceeding with the {}\n",
            op.kind()
        ));
        return Err(Fail::bail(code::ERROR));
    }
    let lock = if dry_only {
        None
    } else {
        Some(st.backend.lock(&st.project.name, &st.name)?)
    };
    let blinded: BTreeMap<String, String> = cfg
        .blinded(secret::MASK)
        .into_iter()
        .map(|(k, v)| (k, display_string(&v)))
        .collect();
    let runner = Runner {
        ctx,
        st: &st,
        op,
        key: key.clone(),
        crypter: &crypter,
        salt: cfg.salt().map(String::from),
        config: &config,
        blinded,
        program: &program,
        old,
        dry_only,
        plan: plan.as_ref(),
        plan_config: cfg
            .entries()
            .into_iter()
            .map(|(k, v)| (k, serde_json::to_value(v).unwrap_or(Value::Null)))
            .collect(),
    };
    let result = runner.run_all(skip_preview);
    if let Some(l) = lock {
        l.release();
    }
    result
}

/// Interactive confirmation (only reached on a terminal without `--yes`).
fn confirm(op: Op) -> bool {
    output::print(&format!(
        "Do you want to perform this {}? [yes/no]: ",
        op.kind()
    ));
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim(), "yes" | "y")
}

/// `FAKE_PULUMI_EXPECT_CONFIG_<P>`: the program's config must hold these values.
fn check_expected_config(
    key: &str,
    project: &crate::project::Project,
    config: &BTreeMap<String, Value>,
    streams: bool,
) -> Result<()> {
    let want = hook_json("EXPECT_CONFIG", key)?;
    for (k, expected) in want {
        let q = project.qualify(&k);
        let got = config.get(&q).map(secret::reveal);
        let same = match (&got, &expected) {
            (Some(g), Value::String(e)) => display_string(g) == *e,
            (Some(g), e) => g == e,
            (None, _) => false,
        };
        if !same {
            let got = got
                .map(|g| g.to_string())
                .unwrap_or_else(|| "nothing".into());
            let msg = format!(
                "FAKE_PULUMI_EXPECT_CONFIG_{key}: config '{q}' expected {expected}, got {got}"
            );
            if streams {
                output::event(
                    "diagnosticEvent",
                    json!({"prefix": "error: ", "message": format!("{msg}\n"),
                           "color": "never", "severity": "error"}),
                );
            }
            return Err(Fail::config(msg));
        }
    }
    Ok(())
}

/// The state's resources with secrets decrypted (with the salt the state records).
fn decrypt_state(state: &StackState) -> Result<Vec<Resource>> {
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

struct Runner<'a> {
    ctx: &'a Ctx,
    st: &'a Stack,
    op: Op,
    key: String,
    crypter: &'a Crypter,
    salt: Option<String>,
    config: &'a BTreeMap<String, Value>,
    blinded: BTreeMap<String, String>,
    program: &'a Program,
    old: Vec<Resource>,
    /// Only the dry run (preview, or `--preview-only`).
    dry_only: bool,
    /// `up --plan FILE`: every pass is constrained to it.
    plan: Option<&'a Plan>,
    /// The stack config file's `config:` as written, for `preview --save-plan`.
    plan_config: Map<String, Value>,
}

/// What one pass leaves behind.
struct Pass {
    outcome: Outcome,
    /// The stack's resources afterwards (meaningful when not a dry run).
    resources: Vec<Resource>,
    changed: bool,
    /// What the preview planned, when `--save-plan` asked for it.
    recorded: Option<Recorder>,
}

impl Runner<'_> {
    fn run_all(&self, skip_preview: bool) -> Result<()> {
        let streaming_preview = std::env::var("PULUMI_ENABLE_STREAMING_JSON_PREVIEW")
            .is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
        let json = self.ctx.json();
        let preview_mode = match (json, streaming_preview) {
            (false, _) => Mode::Human,
            (true, true) => Mode::Stream,
            (true, false) => Mode::Digest,
        };
        if self.dry_only || !skip_preview {
            let pass = self.pass(preview_mode, true)?;
            if pass.outcome != Outcome::Ok || self.dry_only {
                return self.conclude(pass, true);
            }
        }
        let mode = if json { Mode::Stream } else { Mode::Human };
        let pass = self.pass(mode, false)?;
        self.save(&pass)?;
        self.conclude(pass, false)
    }

    fn conclude(&self, pass: Pass, dry_run: bool) -> Result<()> {
        match pass.outcome {
            Outcome::Ok => {
                if self.ctx.args.bool("expect-no-changes") && pass.changed {
                    return Err(Fail::new(
                        7,
                        "no changes were expected but changes occurred",
                    ));
                }
                if let (Some(rec), Some(path)) = (pass.recorded, self.save_plan_path()) {
                    rec.write(
                        path,
                        self.plan_config.clone(),
                        self.crypter,
                        self.ctx.show_secrets(),
                    )?;
                    if !self.ctx.json() {
                        eprintln!(
                            "Update plan written to '{path}'\nRun `pulumi up --plan='{path}'` \
                             to constrain the update to the operations planned by this preview"
                        );
                    }
                }
                Ok(())
            }
            Outcome::Rejected => Err(Fail::bail(code::ERROR)),
            Outcome::Failed => {
                let code = std::env::var("FAKE_PULUMI_FAIL_CODE")
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(code::ERROR);
                Err(Fail::bail(code))
            }
            Outcome::Cancelled => {
                let what = if dry_run { "preview" } else { self.op.kind() };
                Err(Fail::new(code::CANCELLED, format!("{what} canceled")))
            }
        }
    }

    /// `preview --save-plan FILE`.
    fn save_plan_path(&self) -> Option<&str> {
        self.ctx
            .args
            .value("save-plan")
            .filter(|p| self.op == Op::Preview && !p.is_empty())
    }

    fn save(&self, pass: &Pass) -> Result<()> {
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

    fn failing(&self) -> bool {
        hook("FAIL", &self.key).is_some_and(|ops| {
            ops.split(',')
                .any(|o| o.trim() == self.op.hook_name() || o.trim() == "all")
        })
    }

    fn delay(&self, dry_run: bool) -> Duration {
        if dry_run && !self.dry_only {
            return Duration::ZERO; // the preview before an update costs nothing
        }
        let ms = hook("DELAY_MS", &self.key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Duration::from_millis(ms)
    }

    fn pass(&self, mode: Mode, dry_run: bool) -> Result<Pass> {
        let project = &self.st.project.name;
        let stack = &self.st.name;
        let stack_urn = urn(stack, project, STACK_TYPE, &format!("{project}-{stack}"));
        let mut d = Display::new(
            mode,
            dry_run,
            &stack_urn,
            self.ctx.args.bool("suppress-outputs"),
        );
        d.banner(self.op.banner(dry_run), stack);
        d.prelude(self.blinded.clone());
        signals::enter_engine(dry_run);
        let mut run = PassRun {
            r: self,
            d,
            dry_run,
            slice: Duration::ZERO,
            stack_urn,
            check: self.plan.map(Plan::checker),
            record: (dry_run && self.save_plan_path().is_some()).then(Recorder::default),
        };
        let pass = match self.op {
            Op::Up | Op::Preview => run.update(),
            Op::Refresh => run.refresh(),
            Op::Destroy => run.destroy(),
        };
        signals::leave_engine();
        Ok(pass)
    }
}

struct PassRun<'a, 'b> {
    r: &'a Runner<'b>,
    d: Display,
    dry_run: bool,
    /// How long each step takes (the hook's delay spread over the steps).
    slice: Duration,
    stack_urn: String,
    /// `up --plan`: this pass's copy of the plan (its steps are consumed).
    check: Option<Plan>,
    /// `preview --save-plan`: what this pass plans.
    record: Option<Recorder>,
}

impl PassRun<'_, '_> {
    /// The fail hook applies to its own operation, not to the preview before it.
    fn failing(&self) -> bool {
        self.r.failing() && (!self.dry_run || self.r.dry_only)
    }

    fn set_slices(&mut self, steps: usize) {
        let total = self.r.delay(self.dry_run);
        self.slice = total / (steps.max(1) as u32);
    }

    /// Sleeps one step's time in small pieces; true if a cancel arrived. A cancel lets
    /// the step in flight complete at once, or after `FAKE_PULUMI_CANCEL_MS` (the time a
    /// graceful cancellation takes, to leave room for a second Ctrl-C).
    fn pause(&self) -> bool {
        let mut until = Instant::now() + self.slice;
        let mut seen = false;
        loop {
            let now = Instant::now();
            if !seen && signals::cancelled() {
                seen = true;
                let linger = hook("CANCEL_MS", &self.r.key)
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                until = until.min(now + Duration::from_millis(linger));
            }
            if now >= until {
                return signals::cancelled();
            }
            std::thread::sleep((until - now).min(Duration::from_millis(5)));
        }
    }

    fn stack_resource(&self, old: Option<&Resource>, outputs: Map<String, Value>) -> Resource {
        let now = now_rfc3339();
        Resource {
            urn: self.stack_urn.clone(),
            custom: false,
            id: String::new(),
            ty: STACK_TYPE.into(),
            inputs: Map::new(),
            outputs,
            parent: String::new(),
            dependencies: Vec::new(),
            provider: String::new(),
            created: old
                .map(|o| o.created.clone())
                .unwrap_or_else(|| now.clone()),
            modified: now,
        }
    }

    /// Records a failing step: resource diagnostic, resOpFailedEvent, the run's error.
    fn fail_step(&mut self, op: &str, old: Option<&Resource>, new: Option<&Resource>, msg: &str) {
        let urn = new.or(old).map(|r| r.urn.clone()).unwrap_or_default();
        self.d.diag(&urn, "error", msg);
        self.d.failed(op, old, new);
    }

    fn fail_message(&self) -> String {
        if let Ok(text) = std::env::var("FAKE_PULUMI_FAIL_MESSAGE") {
            return text;
        }
        format!(
            "fake-pulumi: simulated failure of `{}` (FAKE_PULUMI_FAIL_{})",
            self.r.op.hook_name(),
            self.r.key
        )
    }

    /// The run's closing diagnostic, summary and cancelEvent.
    fn close(&mut self, outcome: Outcome, outputs: Option<&Map<String, Value>>) {
        if outcome == Outcome::Failed {
            let what = if self.dry_run {
                "preview"
            } else {
                self.r.op.kind()
            };
            let urn = self.stack_urn.clone();
            self.d.diag(&urn, "error", &format!("{what} failed"));
        }
        let destroyed = (self.r.op == Op::Destroy && outcome == Outcome::Ok && !self.dry_run)
            .then_some(self.r.st.name.as_str());
        self.d.finish(outputs, destroyed);
    }

    fn update(&mut self) -> Pass {
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

    fn refresh(&mut self) -> Pass {
        let r = self.r;
        self.set_slices(r.old.len());
        let fail = self.failing();
        let mut outcome = Outcome::Ok;
        for (i, x) in r.old.iter().enumerate() {
            if signals::cancelled() {
                outcome = Outcome::Cancelled;
                break;
            }
            self.d.pre("refresh", Some(x), Some(x));
            let interrupted = self.pause();
            if fail && i + 1 == r.old.len() {
                let msg = self.fail_message();
                self.fail_step("refresh", Some(x), Some(x), &msg);
                outcome = Outcome::Failed;
                break;
            }
            self.d.done("same", Some(x), Some(x));
            if interrupted {
                outcome = Outcome::Cancelled;
                break;
            }
        }
        if fail && r.old.is_empty() {
            outcome = Outcome::Failed;
        }
        self.close(outcome, None);
        Pass {
            outcome,
            resources: r.old.clone(),
            changed: false,
            recorded: None,
        }
    }

    fn destroy(&mut self) -> Pass {
        let r = self.r;
        // Resources in reverse order, the stack resource last.
        let mut order: Vec<&Resource> = r.old.iter().filter(|x| x.ty != STACK_TYPE).rev().collect();
        order.extend(r.old.iter().filter(|x| x.ty == STACK_TYPE));
        self.set_slices(order.len());
        let fail = self.failing();
        let fail_at = order
            .iter()
            .rposition(|x| x.ty != STACK_TYPE)
            .or(order.len().checked_sub(1));
        let mut deleted: HashSet<String> = HashSet::new();
        let mut outcome = Outcome::Ok;
        for (i, x) in order.iter().enumerate() {
            if signals::cancelled() {
                outcome = Outcome::Cancelled;
                break;
            }
            self.d.pre("delete", Some(x), None);
            let interrupted = self.pause();
            if fail && Some(i) == fail_at {
                let msg = self.fail_message();
                self.fail_step("delete", Some(x), None, &msg);
                outcome = Outcome::Failed;
                break;
            }
            self.d.done("delete", Some(x), None);
            deleted.insert(x.urn.clone());
            if interrupted {
                outcome = Outcome::Cancelled;
                break;
            }
        }
        if fail && order.is_empty() {
            outcome = Outcome::Failed;
        }
        self.close(outcome, None);
        Pass {
            outcome,
            resources: r
                .old
                .iter()
                .filter(|x| !deleted.contains(&x.urn))
                .cloned()
                .collect(),
            changed: !deleted.is_empty(),
            recorded: None,
        }
    }
}
