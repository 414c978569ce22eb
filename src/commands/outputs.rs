//! `strata outputs [PROJECT]`: the stack outputs of one or all projects; secrets masked
//! unless `--show-secrets`.

use serde_json::{Map, Value};

use crate::cli::OutputsArgs;
use crate::engine::pulumi::{Calls, PulumiEngine};
use crate::engine::{Control, Job, Operation};
use crate::error::{Error, Result};
use crate::plan::NodeKind;
use crate::settings::Settings;
use crate::util::slug;
use crate::workspace::ProjectKind;
use crate::workspace::Target;

pub fn run(target: &Target, settings: &Settings, args: &OutputsArgs) -> Result<i32> {
    let loaded = super::load(target, true)?;
    let Some(stack) = loaded.stack.clone() else {
        return Err(crate::workspace::no_stack_error(&loaded.ws));
    };
    let nodes: Vec<usize> = match &args.project {
        Some(p) => vec![loaded.plan.resolve(p)?],
        None => loaded
            .plan
            .order
            .iter()
            .copied()
            .filter(|&i| loaded.plan.nodes[i].kind != NodeKind::Builtin)
            .collect(),
    };
    let needs_pulumi = nodes
        .iter()
        .any(|&i| loaded.plan.nodes[i].kind == NodeKind::Pulumi);
    let reader = if needs_pulumi {
        Reader::with_pulumi(&loaded, &stack)?
    } else {
        Reader::without_pulumi(&loaded, &stack)
    };
    let mut all = Map::new();
    for i in nodes {
        let node = &loaded.plan.nodes[i];
        let value = match reader.read(&node.path, args.show_secrets)? {
            Some(m) => Value::Object(m),
            None => Value::Null,
        };
        all.insert(node.path.clone(), value);
    }
    if settings.json {
        let doc = match &args.project {
            Some(_) => all
                .into_iter()
                .next()
                .map(|(_, v)| v)
                .unwrap_or(Value::Null),
            None => Value::Object(all),
        };
        super::print(&format!("{doc}\n"))?;
        return Ok(0);
    }
    let mut out = String::new();
    for (path, value) in &all {
        out.push_str(&format!("{path}\n"));
        match value {
            Value::Object(m) if m.is_empty() => out.push_str("  (no outputs)\n"),
            Value::Object(m) => {
                let w = m.keys().map(|k| k.len()).max().unwrap_or(0);
                for (k, v) in m {
                    let text = match v {
                        Value::String(s) => {
                            s.lines().next().unwrap_or("").to_string()
                                + if s.lines().count() > 1 { " …" } else { "" }
                        }
                        other => other.to_string(),
                    };
                    out.push_str(&format!("  {k:<w$}  {text}\n"));
                }
            }
            _ => out.push_str(&format!(
                "  (not deployed on stack {stack}: run `strata up --project {path}`)\n"
            )),
        }
    }
    super::print(&out)?;
    Ok(0)
}

/// Reads the outputs of the projects of one stack: a command project's recorded outputs,
/// a Pulumi project's through `pulumi stack output --json`.
pub struct Reader<'a> {
    loaded: &'a super::Loaded,
    stack: String,
    env: std::collections::BTreeMap<String, String>,
    engine: Option<PulumiEngine>,
}

impl<'a> Reader<'a> {
    /// A reader that can read Pulumi projects: the CLI found and the passphrase set.
    pub fn with_pulumi(loaded: &'a super::Loaded, stack: &str) -> Result<Reader<'a>> {
        use crate::pipeline::preflight;
        let env = crate::pipeline::env::pulumi_env(&loaded.ws);
        let bin = preflight::find_pulumi(&loaded.ws, &env, &loaded.plan)?;
        // A passphrase where a stack needs one; and on a legacy layout every project's
        // stack of a name is one stack: its outputs would be another project's.
        let given = preflight::Given {
            plan: &loaded.plan,
            full: &loaded.plan,
            profile: &loaded.profile,
            backends: &loaded.backends,
            stack: Some(stack),
        };
        let problems = preflight::backend_problems(&loaded.ws, &given);
        if !problems.is_empty() {
            return Err(crate::error::Error::config(problems.join("\n")));
        }
        Ok(Reader {
            loaded,
            stack: stack.to_string(),
            env,
            engine: Some(PulumiEngine::new(bin)),
        })
    }

    /// A reader of command projects only.
    pub fn without_pulumi(loaded: &'a super::Loaded, stack: &str) -> Reader<'a> {
        Reader {
            loaded,
            stack: stack.to_string(),
            env: Default::default(),
            engine: None,
        }
    }

    /// The outputs of the project at `path`; `None` when it has not been deployed (or,
    /// without the CLI, for a Pulumi project). Secrets are `"[secret]"` unless
    /// `show_secrets`.
    pub fn read(&self, path: &str, show_secrets: bool) -> Result<Option<Map<String, Value>>> {
        let loaded = self.loaded;
        let Some(node) = loaded.plan.node(path) else {
            return Ok(None);
        };
        let Some(project) = &node.project else {
            return Ok(None);
        };
        let state_dir = loaded.ws.state_dir(&self.stack);
        match &project.kind {
            ProjectKind::Command(_) => {
                let f = state_dir
                    .join("outputs")
                    .join(format!("{}.json", slug(&node.path)));
                Ok(std::fs::read_to_string(&f)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Map<String, Value>>(&t).ok()))
            }
            ProjectKind::Pulumi { name, .. } => {
                let Some(engine) = &self.engine else {
                    return Ok(None);
                };
                let job = Job {
                    path: node.path.clone(),
                    name: name.clone(),
                    dir: project.dir.clone(),
                    op: Operation::Up,
                    stack: loaded
                        .profile
                        .entry(path)
                        .map_or_else(|| self.stack.clone(), |e| e.stack_name(&self.stack)),
                    env: crate::pipeline::env::with_backend(
                        self.env.clone(),
                        loaded.backends.of(path),
                    ),
                    config_file: loaded.ws.stack_config_path(&self.stack),
                    inputs: Default::default(),
                    needed_outputs: vec![],
                    scratch_dir: state_dir.join("work").join(slug(&node.path)),
                    secret_config: Default::default(),
                    refresh: false,
                    plan: None,
                };
                // A file or S3 backend's checkpoint holds them (secrets decrypted where the
                // passphrase provider allows): no process.
                let from_checkpoint = if show_secrets {
                    PulumiEngine::stack_outputs_from_checkpoint_revealed(&job)
                } else {
                    PulumiEngine::stack_outputs_from_checkpoint(&job)
                };
                if from_checkpoint.is_some() {
                    return Ok(from_checkpoint);
                }
                let mut calls = Calls {
                    job: &job,
                    control: &Control::new(),
                    report: &mut |_| {},
                    procs: 0,
                    created_stack: false,
                };
                match engine.stack_outputs(&mut calls, show_secrets) {
                    Ok(m) => Ok(Some(m)),
                    Err(f) if f.is_missing_stack() => Ok(None),
                    Err(f) => Err(Error::failed(f.message().to_string())),
                }
            }
        }
    }
}
