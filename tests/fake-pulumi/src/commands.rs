//! The commands that are not engine operations: stack, config, whoami, version, about,
//! cancel.

use serde_json::{Map, Value, json};
use serde_yaml::{Mapping, Value as Yaml};
use std::io::Read;

use crate::config::{display_string, secure_text};
use crate::crypto::{self, Crypter};
use crate::ctx::{Ctx, validate_stack_name};
use crate::error::{Fail, Result, code};
use crate::output;
use crate::secret;
use crate::state::{Backend, ORG, StackState, VERSION, fq_name};

pub const USAGE: &str = "fake-pulumi: a test double of the Pulumi CLI\n\n\
Usage:\n  pulumi [command]\n\n\
Commands: up (update), preview, refresh, destroy, stack init|output|ls|rm, \
config [set|get|rm], whoami, version, about, cancel\n\n\
Flags:\n      --otel-traces string   Export OpenTelemetry traces to the specified endpoint\n";

/// Runs one command; engine operations go to [`crate::engine`].
pub fn run(ctx: &Ctx) -> Result<()> {
    if ctx.args.bool("help") || ctx.args.bool("-h") || ctx.command == "help" {
        output::print(USAGE);
        return Ok(());
    }
    // cobra refuses a flag the command does not have before anything runs.
    if let Some(flag) =
        crate::flags::unknown(&ctx.command, ctx.args.flags.keys().map(String::as_str))
    {
        return Err(Fail::config(format!("unknown flag: --{flag}")));
    }
    match ctx.command.as_str() {
        "up" => crate::engine::run(ctx, crate::engine::Op::Up),
        "preview" => crate::engine::run(ctx, crate::engine::Op::Preview),
        "refresh" => crate::engine::run(ctx, crate::engine::Op::Refresh),
        "destroy" => crate::engine::run(ctx, crate::engine::Op::Destroy),
        "stack init" => stack_init(ctx),
        "stack output" => stack_output(ctx),
        "stack ls" => stack_ls(ctx),
        "stack rm" => stack_rm(ctx),
        "stack select" => Err(Fail::error(
            "fake-pulumi does not implement `stack select`: pass --stack on every command",
        )),
        "config" => config_list(ctx),
        "config get" => config_get(ctx),
        "config set" => config_set(ctx),
        "config rm" => config_rm(ctx),
        "whoami" => whoami(ctx),
        "version" => {
            output::print(&format!("{VERSION}\n"));
            Ok(())
        }
        "about" => about(ctx),
        "cancel" => cancel(ctx),
        "" => {
            output::print(USAGE);
            Ok(())
        }
        other => {
            let first = other.split(' ').next_back().unwrap_or(other);
            Err(Fail::error(format!(
                "unknown command \"{first}\" for \"pulumi\""
            )))
        }
    }
}

fn stack_init(ctx: &Ctx) -> Result<()> {
    let project = ctx.project()?;
    let raw = ctx
        .stack_arg()
        .ok_or_else(|| Fail::error("missing stack name"))?;
    let name = crate::ctx::parse_stack_ref(&raw, &project.name)?;
    validate_stack_name(&name)?;
    if let Some(sp) = ctx.args.value("secrets-provider")
        && sp != "passphrase"
        && sp != "default"
    {
        return Err(Fail::error(format!(
            "fake-pulumi only supports the passphrase secrets provider, not '{sp}'"
        )));
    }
    let backend = Backend::from_env()?;
    let pass = crypto::passphrase()?;
    if backend.exists(&project.name, &name) {
        return Err(Fail::error(format!(
            "stack '{}' already exists",
            backend.fq(&project.name, &name)
        )));
    }
    let mut cfg = ctx.stack_config(&project, &name)?;
    cfg.crypter(&pass)?;
    let state = StackState {
        salt: cfg.salt().map(String::from),
        last_update: None,
        resources: Vec::new(),
    };
    backend.save(&project.name, &name, &state)?;
    output::print(&format!("Created stack '{name}'\n"));
    Ok(())
}

fn stack_output(ctx: &Ctx) -> Result<()> {
    let st = ctx.require_stack()?;
    let stored = Value::Object(st.state.outputs());
    let shown = if ctx.show_secrets() && secret::contains_secret(&stored) {
        let c = state_crypter(&st.state)?;
        let plain =
            secret::decrypt_tree(&stored, &c).map_err(|_| crypto::incorrect_passphrase())?;
        secret::reveal(&plain)
    } else {
        secret::mask(&stored)
    };
    if let Some(name) = ctx.rest.first() {
        let v = shown.get(name).ok_or_else(|| {
            Fail::error(format!(
                "current stack does not have output property '{name}'"
            ))
        })?;
        let text = if ctx.json() {
            pretty2(v)
        } else {
            display_string(v)
        };
        output::print(&format!("{text}\n"));
        return Ok(());
    }
    if ctx.json() {
        output::print(&format!("{}\n", pretty2(&shown)));
        return Ok(());
    }
    let obj = shown.as_object().cloned().unwrap_or_default();
    if obj.is_empty() {
        output::print("No output values currently in this stack\n");
        return Ok(());
    }
    let mut s = format!("Current stack outputs ({}):\n", obj.len());
    let width = obj.keys().map(String::len).max().unwrap_or(0).max(6);
    s.push_str(&format!("    {:<width$}  VALUE\n", "OUTPUT"));
    for (k, v) in &obj {
        s.push_str(&format!("    {k:<width$}  {}\n", display_string(v)));
    }
    output::print(&s);
    Ok(())
}

/// The crypter for secrets in a checkpoint (its recorded salt, this passphrase).
pub fn state_crypter(state: &StackState) -> Result<Crypter> {
    let pass = crypto::passphrase()?;
    let salt = state
        .salt
        .as_deref()
        .ok_or_else(|| Fail::error("the stack state records no encryption salt"))?;
    Crypter::from_salt(&pass, salt)
}

fn stack_ls(ctx: &Ctx) -> Result<()> {
    let backend = Backend::from_env()?;
    let project = ctx.project().ok();
    let filter = if ctx.args.bool("all") {
        None
    } else {
        project.as_ref().map(|p| p.name.as_str())
    };
    let mut rows = Vec::new();
    for (p, s) in backend.list(filter) {
        let st = backend.load(&p, &s)?.unwrap_or_default();
        // A legacy stack has no project: its bare name.
        let name = if p.is_empty() || project.as_ref().is_some_and(|pr| pr.name == p) {
            s.clone()
        } else {
            fq_name(&p, &s)
        };
        rows.push((name, st));
    }
    if ctx.json() || ctx.args.value("output") == Some("json") {
        let arr: Vec<Value> = rows
            .iter()
            .map(|(name, st)| {
                let mut o = Map::new();
                o.insert("name".into(), json!(name));
                o.insert("current".into(), json!(false));
                if let Some(t) = &st.last_update {
                    o.insert("lastUpdate".into(), json!(t));
                    o.insert("resourceCount".into(), json!(st.resources.len()));
                }
                Value::Object(o)
            })
            .collect();
        output::print(&format!("{}\n", pretty2(&Value::Array(arr))));
        return Ok(());
    }
    let mut s = String::from("NAME  LAST UPDATE  RESOURCE COUNT\n");
    for (name, st) in rows {
        let (when, count) = match &st.last_update {
            Some(t) => (t.clone(), st.resources.len().to_string()),
            None => ("n/a".into(), "n/a".into()),
        };
        s.push_str(&format!("{name}  {when}  {count}\n"));
    }
    output::print(&s);
    Ok(())
}

fn stack_rm(ctx: &Ctx) -> Result<()> {
    // `stack rm NAME` names the stack positionally, like `stack init`.
    let project = ctx.project()?;
    let Some(raw) = ctx.stack_arg() else {
        return Err(Fail::new(code::STACK_NOT_FOUND, "no stack selected"));
    };
    let name = crate::ctx::parse_stack_ref(&raw, &project.name)?;
    let backend = Backend::from_env()?;
    let state = backend
        .load(&project.name, &name)?
        .ok_or_else(|| Fail::stack_not_found(&name))?;
    if !ctx.yes() && !ctx.interactive() {
        return Err(Fail::config(
            "--yes must be passed in to proceed when running in non-interactive mode",
        ));
    }
    if !state.resources.is_empty() && !ctx.args.bool("force") {
        return Err(Fail::error(format!(
            "'{name}' still has resources; removal rejected. Possible actions:\n\
             - Make sure that '{name}' is the stack that you want to destroy\n\
             - Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`\n\
             - Run `pulumi stack rm --force` to override this error"
        )));
    }
    backend.remove(&project.name, &name)?;
    if !ctx.args.bool("preserve-config") && ctx.args.value("config-file").is_none() {
        let _ = std::fs::remove_file(project.stack_config_path(&name));
    }
    output::print(&format!("Stack '{name}' has been removed!\n"));
    Ok(())
}

fn config_list(ctx: &Ctx) -> Result<()> {
    let st = ctx.require_stack()?;
    let cfg = ctx.stack_config(&st.project, &st.name)?;
    let values = if ctx.show_secrets() && cfg.has_secure() {
        let mut cfg = cfg.clone();
        let (c, _) = cfg.crypter(&crypto::passphrase()?)?;
        cfg.decrypted(Some(&c))?
    } else {
        cfg.blinded("[secret]")
    };
    let raw: std::collections::BTreeMap<String, Yaml> = cfg.entries().into_iter().collect();
    let is_secure = |k: &str| raw.get(k).is_some_and(|v| secure_text(v).is_some());
    if ctx.json() {
        let mut out = Map::new();
        for (k, v) in &values {
            let mut e = Map::new();
            let secure = is_secure(k);
            if !secure || ctx.show_secrets() {
                let v = secret::reveal(v);
                e.insert("value".into(), json!(display_string(&v)));
                if v.is_object() || v.is_array() {
                    e.insert("objectValue".into(), v);
                }
            }
            e.insert("secret".into(), json!(secure));
            out.insert(k.clone(), Value::Object(e));
        }
        output::print(&format!("{}\n", pretty2(&Value::Object(out))));
        return Ok(());
    }
    let width = values.keys().map(String::len).max().unwrap_or(0).max(3);
    let mut s = format!("{:<width$}  VALUE\n", "KEY");
    for (k, v) in &values {
        s.push_str(&format!(
            "{k:<width$}  {}\n",
            display_string(&secret::reveal(v))
        ));
    }
    output::print(&s);
    Ok(())
}

fn config_key(ctx: &Ctx, project: &crate::project::Project) -> Result<String> {
    let key = ctx
        .rest
        .first()
        .ok_or_else(|| Fail::error("accepts 1 arg(s), received 0"))?;
    let q = project.qualify(key);
    let head = q.split(['.', '[']).next().unwrap_or(&q);
    if head.matches(':').count() != 1 || head.starts_with(':') || head.ends_with(':') {
        return Err(Fail::error(format!(
            "could not parse {key} as a configuration key (configuration keys should be of the \
             form `<namespace>:<name>`)"
        )));
    }
    Ok(q)
}

fn config_get(ctx: &Ctx) -> Result<()> {
    let st = ctx.require_stack()?;
    let key = config_key(ctx, &st.project)?;
    let mut cfg = ctx.stack_config(&st.project, &st.name)?;
    let raw = cfg.get(&key).ok_or_else(|| {
        Fail::error(format!(
            "configuration key '{key}' not found for stack '{}'",
            st.name
        ))
    })?;
    let secure = secure_text(&raw).is_some();
    let values = if crate::config::secure_text(&raw).is_some() || has_nested_secure(&raw) {
        let (c, _) = cfg.crypter(&crypto::passphrase()?)?;
        cfg.decrypted(Some(&c))?
    } else {
        cfg.decrypted(None)?
    };
    let v = secret::reveal(&values[&key]);
    if ctx.json() {
        let mut e = Map::new();
        e.insert("value".into(), json!(display_string(&v)));
        if v.is_object() || v.is_array() {
            e.insert("objectValue".into(), v.clone());
        }
        e.insert("secret".into(), json!(secure));
        output::print(&format!("{}\n", pretty2(&Value::Object(e))));
    } else {
        output::print(&format!("{}\n", display_string(&v)));
    }
    Ok(())
}

fn has_nested_secure(v: &Yaml) -> bool {
    match v {
        Yaml::Mapping(m) => m
            .values()
            .any(|e| secure_text(e).is_some() || has_nested_secure(e)),
        Yaml::Sequence(s) => s
            .iter()
            .any(|e| secure_text(e).is_some() || has_nested_secure(e)),
        _ => false,
    }
}

fn config_set(ctx: &Ctx) -> Result<()> {
    let st = ctx.require_stack()?;
    let key = config_key(ctx, &st.project)?;
    let value = match ctx.rest.get(1) {
        Some(v) => v.clone(),
        None => {
            let mut buf = String::new();
            std::io::stdin()
                .read_to_string(&mut buf)
                .map_err(|e| Fail::error(format!("reading value from stdin: {e}")))?;
            let buf = buf.strip_suffix('\n').unwrap_or(&buf);
            buf.strip_suffix('\r').unwrap_or(buf).to_string()
        }
    };
    let mut cfg = ctx.stack_config(&st.project, &st.name)?;
    let node = if ctx.args.bool("secret") {
        let (c, _) = cfg.crypter(&crypto::passphrase()?)?;
        let mut m = Mapping::new();
        m.insert(Yaml::from("secure"), Yaml::from(c.encrypt(&value)));
        Yaml::Mapping(m)
    } else {
        typed_value(ctx.args.value("type"), &value)?
    };
    cfg.set(&key, node, ctx.args.bool("path"))?;
    cfg.save()
}

/// `--type int|bool|string`: what `config set --type` stores.
fn typed_value(ty: Option<&str>, value: &str) -> Result<Yaml> {
    match ty.unwrap_or("string") {
        "string" => Ok(Yaml::from(value)),
        "int" | "integer" => value
            .parse::<i64>()
            .map(Yaml::from)
            .map_err(|_| Fail::error(format!("invalid int value: {value}"))),
        "bool" | "boolean" => value
            .parse::<bool>()
            .map(Yaml::from)
            .map_err(|_| Fail::error(format!("invalid bool value: {value}"))),
        other => Err(Fail::error(format!("unsupported config type '{other}'"))),
    }
}

fn config_rm(ctx: &Ctx) -> Result<()> {
    let st = ctx.require_stack()?;
    let key = config_key(ctx, &st.project)?;
    let mut cfg = ctx.stack_config(&st.project, &st.name)?;
    if cfg.remove(&key) {
        cfg.save()?;
    }
    Ok(())
}

fn user() -> String {
    std::env::var("FAKE_PULUMI_USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "fake-user".into())
}

fn whoami(ctx: &Ctx) -> Result<()> {
    let backend = Backend::from_env()?;
    let user = user();
    if ctx.json() {
        let v = json!({"user": user, "organizations": [], "url": backend.url});
        output::print(&format!("{}\n", pretty2(&v)));
    } else if ctx.args.bool("verbose") {
        output::print(&format!(
            "User: {user}\nOrganizations: \nBackend URL: {}\n",
            backend.url
        ));
    } else {
        output::print(&format!("{user}\n"));
    }
    Ok(())
}

fn about(ctx: &Ctx) -> Result<()> {
    let backend = Backend::from_env().ok();
    let url = backend.as_ref().map(|b| b.url.clone()).unwrap_or_default();
    let project = ctx.project().ok().map(|p| p.name);
    if ctx.json() {
        let v = json!({
            "cliVersion": VERSION.trim_start_matches('v'),
            "host": {"os": std::env::consts::OS, "arch": std::env::consts::ARCH},
            "backend": {"name": "fake-pulumi", "url": url, "user": user(), "organizations": [ORG]},
            "project": project,
        });
        output::print(&format!("{}\n", pretty2(&v)));
    } else {
        output::print(&format!(
            "CLI\nVersion      {}\nGo Version   fake\n\nHost\nOS       {}\nArch     {}\n\n\
             Backend\nName           fake-pulumi\nURL            {url}\nUser           {}\n",
            VERSION.trim_start_matches('v'),
            std::env::consts::OS,
            std::env::consts::ARCH,
            user()
        ));
    }
    Ok(())
}

fn cancel(ctx: &Ctx) -> Result<()> {
    let st = ctx.require_stack()?;
    st.backend.remove_locks(&st.project.name, &st.name);
    output::print(&format!(
        "The currently running update for '{}' has been canceled!\n",
        st.name
    ));
    Ok(())
}

/// Go's `json.MarshalIndent(v, "", "  ")`.
pub fn pretty2(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}
