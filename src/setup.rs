//! First run: the stack name, the stack config built from the profile's `config:` keys,
//! prompted on a terminal (dialoguer) or taken from defaults; never a prompt in a
//! non-interactive run.

use dialoguer::{Input, theme::ColorfulTheme};
use serde_yaml::Value;

use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::profile::{ConfigItem, ValueType};
use crate::workspace::stack_config::INFRA_TYPE_KEY;
use crate::workspace::{self, Profile, StackConfig, Workspace};

/// The stack of this run: resolved, or asked for on a terminal and then written into the
/// environment file as `PULUMI_STACK`.
pub fn ensure_stack(ws: &mut Workspace, flag: Option<&str>, interactive: bool) -> Result<String> {
    if let Some(s) = ws.resolve_stack(flag)? {
        return Ok(s);
    }
    if !interactive {
        return Err(crate::workspace::no_stack_error(ws));
    }
    let name: String = Input::with_theme(&ColorfulTheme::default())
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
        .map_err(prompt_error)?;
    ws.env_file.set_var("PULUMI_STACK", &name)?;
    ws.env.insert("PULUMI_STACK".into(), name.clone());
    Ok(name)
}

pub fn prompt_error(e: dialoguer::Error) -> Error {
    Error::interrupted(format!("prompt aborted: {e}"))
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
                .filter_map(workspace::stack_config::scalar_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => workspace::stack_config::scalar_string(other),
    }
}

/// Makes sure the stack config exists with every profile key and the infra_type. Keys
/// missing on a terminal are asked; without one, declared defaults are taken and a key
/// without a default is an error that lists every such key.
pub fn ensure_stack_config(
    ws: &Workspace,
    stack: &str,
    profile: &Profile,
    existing: Option<StackConfig>,
    interactive: bool,
) -> Result<StackConfig> {
    let path = ws.stack_config_path(stack);
    let mut cfg = match existing {
        Some(c) => {
            workspace::check_infra_type(profile, &c, stack)?;
            c
        }
        None => StackConfig::new(&path),
    };
    let mut changed = false;
    let missing: Vec<&ConfigItem> = profile.config.iter().filter(|i| !cfg.has(&i.key)).collect();
    let without_default: Vec<&&ConfigItem> =
        missing.iter().filter(|i| i.default.is_none()).collect();
    if !interactive && !without_default.is_empty() {
        let lines: Vec<String> = without_default
            .iter()
            .map(|i| {
                format!(
                    "  - {} ({}): add `{}: VALUE` under `config:`, or run `pulumi config set {} VALUE --config-file {}` in a project folder",
                    i.key,
                    i.prompt,
                    i.key,
                    i.key,
                    path.display()
                )
            })
            .collect();
        return Err(Error::config(format!(
            "stack `{stack}` is missing {} config value{} and this run cannot prompt (non-interactive):\n{}\n  Set them in {} as shown, or run strata on a terminal to be asked.",
            without_default.len(),
            if without_default.len() == 1 { "" } else { "s" },
            lines.join("\n"),
            display_path(&path)
        )));
    }
    let theme = ColorfulTheme::default();
    for item in missing {
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
                .map_err(prompt_error)?;
            parse_value(&text, item.value_type).map_err(Error::config)?
        } else {
            match (&item.default, item.value_type) {
                (Some(Value::Sequence(s)), _) => Value::Sequence(s.clone()),
                (Some(d), t) => {
                    let text = workspace::stack_config::scalar_string(d).unwrap_or_default();
                    parse_value(&text, t).map_err(|why| {
                        Error::config(format!(
                            "{}: the default of `{}` does not fit its type: {why}",
                            display_path(&profile.file),
                            item.key
                        ))
                    })?
                }
                (None, _) => continue,
            }
        };
        cfg.set(&item.key, value);
        changed = true;
    }
    if cfg.infra_type().is_none() {
        cfg.set(INFRA_TYPE_KEY, Value::String(profile.infra_type.clone()));
        changed = true;
    }
    if changed {
        cfg.save()?;
    }
    Ok(cfg)
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
