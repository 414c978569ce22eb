//! Ask: the questions of a first run — the stack name, missing stack-config keys,
//! missing secrets, the destroy confirmation — on a terminal (dialoguer). Without one,
//! defaults are taken and everything still missing is listed in one error. Writes
//! nothing: the answers go to the `write` stage, which runs under the lock.

use dialoguer::{Input, theme::ColorfulTheme};
use serde_yaml::Value;

use crate::engine::Operation;
use crate::error::{Error, Result};
use crate::secrets::Gathered;
use crate::settings::Settings;
use crate::util::display_path;
use crate::workspace::profile::{ConfigItem, ValueType};
use crate::workspace::stack_config::{self, INFRA_TYPE_KEY};
use crate::workspace::{self, StackConfig, Workspace};

use super::resolve::Resolved;

/// The answers of a run, to be written under the lock.
pub struct Answers {
    /// The stack config the run uses: the one on disk with the new keys.
    pub stack_config: StackConfig,
    /// Keys to add to the stack config (answers, defaults, the infra_type).
    pub new_config: Vec<(String, Value)>,
    /// The secrets (values, redaction list, values to add to the store).
    pub secrets: Gathered,
    /// False when the user declined the destroy confirmation.
    pub confirmed: bool,
}

impl Answers {
    /// True when the `write` stage has something to save.
    pub fn writes_anything(&self) -> bool {
        !self.new_config.is_empty() || !self.secrets.added.is_empty()
    }
}

/// The stack name, asked on a terminal when nothing names one; the `write` stage records
/// it in the env file as `PULUMI_STACK`.
pub fn stack_name() -> Result<String> {
    Input::with_theme(&ColorfulTheme::default())
        .with_prompt("Stack name (for example dev)")
        .default("dev".to_string())
        .validate_with(|s: &String| {
            if workspace::valid_stack_name(s) {
                Ok(())
            } else {
                Err("use letters, digits, -, _ and . only")
            }
        })
        .interact_text()
        .map_err(Error::prompt)
}

/// `pulumi up`'s question, once for the whole environment, after its preview: true when
/// the user types `yes` (or `y`); anything else changes nothing.
pub fn perform_the_update() -> Result<bool> {
    let typed: String = Input::with_theme(&ColorfulTheme::default())
        .with_prompt("Do you want to perform this update? (yes/no)")
        .allow_empty(true)
        .interact_text()
        .map_err(Error::prompt)?;
    Ok(matches!(
        typed.trim().to_ascii_lowercase().as_str(),
        "yes" | "y"
    ))
}

/// Asks (or defaults) every missing value of the run.
pub fn ask(r: &Resolved, settings: &Settings) -> Result<Answers> {
    let stack = r.stack();
    let op = r.req.op;
    let asking = matches!(op, Operation::Up | Operation::Preview);
    let mut missing: Vec<String> = Vec::new();
    let mut new_config = Vec::new();
    if asking {
        new_config = config_answers(r, settings.interactive, &mut missing)?;
    }
    let declared = r.declared_secrets();
    let secrets = crate::secrets::gather(&r.ws, stack, &declared, asking, settings.interactive)?;
    if !missing.is_empty() || !secrets.missing.is_empty() {
        return Err(missing_error(r, &missing, &secrets.missing));
    }
    let mut stack_config = r
        .stack_config
        .clone()
        .unwrap_or_else(|| StackConfig::new(&r.ws.stack_config_path(stack)));
    for (k, v) in &new_config {
        stack_config.set(k, v.clone());
    }
    let confirmed = op != Operation::Destroy || confirm_destroy(r, settings)?;
    Ok(Answers {
        stack_config,
        new_config,
        secrets,
        confirmed,
    })
}

/// Values for the profile keys the stack config lacks, and its infra_type.
fn config_answers(
    r: &Resolved,
    interactive: bool,
    missing: &mut Vec<String>,
) -> Result<Vec<(String, Value)>> {
    let path = r.ws.stack_config_path(r.stack());
    let theme = ColorfulTheme::default();
    let mut out = Vec::new();
    for item in r.missing_config() {
        let value = if interactive {
            let mut input = Input::<String>::with_theme(&theme)
                .with_prompt(format!("{} ({})", item.prompt, item.key));
            if let Some(d) = default_text(item) {
                input = input.default(d);
            }
            let t = item.value_type;
            let text = input
                .validate_with(move |s: &String| parse_value(s, t).map(|_| ()))
                .interact_text()
                .map_err(Error::prompt)?;
            parse_value(&text, item.value_type).map_err(Error::config)?
        } else {
            match (&item.default, item.value_type) {
                (Some(Value::Sequence(s)), _) => Value::Sequence(s.clone()),
                (Some(d), t) => {
                    let text = stack_config::scalar_string(d).unwrap_or_default();
                    parse_value(&text, t).map_err(|why| {
                        Error::config(format!(
                            "{}: the default of `{}` does not fit its type: {why}",
                            display_path(&r.profile.file),
                            item.key
                        ))
                    })?
                }
                (None, _) => {
                    missing.push(format!(
                        "  - {} ({}): add `{}: VALUE` under `config:`, or run `pulumi config set {} VALUE --config-file {}` in a project folder",
                        item.key,
                        item.prompt,
                        item.key,
                        item.key,
                        path.display()
                    ));
                    continue;
                }
            }
        };
        out.push((item.key.clone(), value));
    }
    // MARA's key, for a profile that records one (an adopted repository's has none).
    if !r.profile.infra_type.is_empty()
        && r.stack_config
            .as_ref()
            .and_then(|c| c.infra_type())
            .is_none()
    {
        out.push((
            INFRA_TYPE_KEY.to_string(),
            Value::String(r.profile.infra_type.clone()),
        ));
    }
    Ok(out)
}

/// One error for everything a non-interactive run lacks.
fn missing_error(r: &Resolved, config: &[String], secrets: &[String]) -> Error {
    let stack = r.stack();
    let mut parts = Vec::new();
    if !config.is_empty() {
        parts.push(format!(
            "stack `{stack}` is missing {} config value{} and this run cannot prompt (non-interactive):\n{}\n  Set them in {} as shown, or run strata on a terminal to be asked.",
            config.len(),
            crate::util::plural(config.len()),
            config.join("\n"),
            display_path(&r.ws.stack_config_path(stack))
        ));
    }
    if !secrets.is_empty() {
        parts.push(format!(
            "{} secret{} of stack `{stack}` {} missing and this run cannot prompt:\n{}",
            secrets.len(),
            crate::util::plural(secrets.len()),
            if secrets.len() == 1 { "is" } else { "are" },
            secrets.join("\n")
        ));
    }
    Error::config(parts.join("\n"))
}

/// Asks before destroying on a terminal (the run already required --yes without one):
/// the user types the stack name; anything else (a bare `y` included) destroys nothing.
fn confirm_destroy(r: &Resolved, settings: &Settings) -> Result<bool> {
    if r.req.args.yes || !settings.interactive {
        return Ok(true);
    }
    let typed: String = Input::with_theme(&ColorfulTheme::default())
        .with_prompt(format!(
            "This destroys the resources of {} {}project(s) of stack `{}` (provider {}). Type the stack name to go on",
            r.plan.nodes.len(),
            if r.req.orphans { "orphan " } else { "" },
            r.stack(),
            r.profile.name
        ))
        .allow_empty(true)
        .interact_text()
        .map_err(Error::prompt)?;
    Ok(typed.trim() == r.stack())
}

/// Parses text typed for a config key as its type.
pub fn parse_value(text: &str, t: ValueType) -> std::result::Result<Value, String> {
    let text = text.trim();
    match t {
        ValueType::String => Ok(Value::String(text.to_string())),
        ValueType::Int => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{text}` is not a whole number")),
        ValueType::Bool => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" => Ok(Value::Bool(true)),
            "false" | "no" | "n" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not true or false")),
        },
        ValueType::List => Ok(Value::Sequence(
            text.split(',')
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )),
    }
}

fn default_text(item: &ConfigItem) -> Option<String> {
    match item.default.as_ref()? {
        Value::Sequence(items) => Some(
            items
                .iter()
                .filter_map(stack_config::scalar_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => stack_config::scalar_string(other),
    }
}

/// The workspace's env file does not name the stack: the run's stack goes there.
pub fn stack_to_remember(ws: &Workspace, stack: &str) -> Option<String> {
    (ws.env_file.get("PULUMI_STACK").is_none_or(str::is_empty)).then(|| stack.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_type() {
        assert_eq!(parse_value(" 3 ", ValueType::Int).unwrap(), Value::from(3));
        assert!(parse_value("three", ValueType::Int).is_err());
        assert_eq!(
            parse_value("yes", ValueType::Bool).unwrap(),
            Value::Bool(true)
        );
        assert!(parse_value("maybe", ValueType::Bool).is_err());
        assert_eq!(
            parse_value("a, b,", ValueType::List).unwrap(),
            Value::Sequence(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            parse_value("x", ValueType::String).unwrap(),
            Value::from("x")
        );
    }
}
